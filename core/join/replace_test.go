package join_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// member makes j a member of a fresh group of a, with two messages held.
func member(t *testing.T, a, j *inst) *grp {
	t.Helper()
	g := a.newGroup(groupSpec{})
	_, seq := g.join(j, addSpec{})
	j.process()
	j.want(seq, "joined")
	j.addMessage(g.id, 100, "before the removal")
	j.addMessage(g.id, 101, "read before the re-add")
	return g
}

func (in *inst) wantMessages(gid []byte) {
	in.w.t.Helper()
	if got := in.messages(gid); !slices.Equal(got, []string{"before the removal", "read before the re-add"}) {
		in.w.t.Fatalf("JOIN-044: messages after the rejoin %q", got)
	}
}

// JOIN-092, JOIN-042, JOIN-044: a member removed and added back replaces
// its state only once it has processed its removal, whatever order the
// re-add Welcome arrives in, and keeps its messages. An inactive group's
// cursor stays at the removal (COMP-186), so a re-add above it is not
// lost to JOIN-043 because the removal was processed first.
func TestJOIN092_ReaddArrivalOrders(t *testing.T) {
	orders := []struct {
		name      string
		noCatchUp bool
		before    func(g *grp, j *inst)
	}{
		{"before the removal is processed, the client catching up later", true, nil},
		{"before the removal is processed, caught up by the receiver", false, nil},
		{"right after the removal is processed", false, func(g *grp, j *inst) { j.catchUp(j.w.ctx, g.id) }},
		{"after further commits reached the topic", false, func(g *grp, j *inst) {
			g.commit(ports.CommitOptions{ForcePath: true})
			g.commit(ports.CommitOptions{ForcePath: true})
			j.catchUp(j.w.ctx, g.id)
		}},
	}
	for _, o := range orders {
		t.Run(o.name, func(t *testing.T) {
			w := newWorld(t, "sqlite")
			a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{NoCatchUp: o.noCatchUp})
			g := member(t, a, j)
			// A forked conversation that asked to be readded (FORK-041, FORK-051).
			j.tx(func(ctx context.Context, tx ports.Tx) error {
				if err := tx.Groups().Update(ctx, g.id, func(gr *ports.Group) error {
					gr.ForkState, gr.MaybeForked = ports.ForkForked, true
					return nil
				}); err != nil {
					return err
				}
				if err := tx.ReaderAdmission().SetFloor(ctx, g.id, 7); err != nil {
					return err
				}
				return tx.Readds().Upsert(ctx, g.id, j.key(), func(s *ports.ReaddStatus) error { s.Requested = true; return nil })
			})
			removal := g.commit(ports.CommitOptions{Remove: []uint32{g.leafOf(j)}})
			ad, seq := g.join(j, addSpec{})
			if o.before != nil {
				o.before(g, j)
			}
			j.process()
			if o.noCatchUp {
				j.want(seq, "held JOIN-092")
				if v, _ := j.view(g.id); !v.Active || v.Epoch != 1 {
					t.Fatalf("the held Welcome changed the state: %+v", v)
				}
				j.catchUp(w.ctx, g.id)
				if gr, _ := j.group(g.id); gr.Active || gr.Cursor != removal {
					t.Fatalf("after its removal the group is %+v, want inactive at %d", gr, removal)
				}
				j.retry()
			}
			j.want(seq, "joined")
			gr, _ := j.group(g.id)
			if !gr.Active || gr.Cursor != ad.anchor || gr.JoinAnchor != ad.anchor || gr.Membership != 2 || gr.ForkState != ports.ForkUnknown {
				t.Fatalf("rejoined group %+v, want active at cursor %d in a second membership", gr, ad.anchor)
			}
			if last := j.joined[len(j.joined)-1]; !last.Replaced {
				t.Fatal("the rejoin is not reported as a replacement")
			}
			if gr.MaybeForked {
				t.Fatal("FORK-041: the replaced state kept its maybe_forked diagnostic")
			}
			j.tx(func(ctx context.Context, tx ports.Tx) error {
				floor, ok, err := tx.ReaderAdmission().Floor(ctx, g.id)
				if err != nil || !ok || floor != 0 {
					t.Fatalf("FORK-088: reader floor %d (%v, %v) after the rejoin", floor, ok, err)
				}
				bs, err := tx.ReaderAdmission().Boundaries(ctx, g.id)
				if err != nil || len(bs) == 0 {
					t.Fatalf("FORK-089: boundaries %v (%v)", bs, err)
				}
				for k, b := range bs {
					if b != ad.anchor {
						t.Fatalf("FORK-089: boundary of %x is %d, want the anchor %d", k[:4], b, ad.anchor)
					}
				}
				rs, err := tx.Readds().Get(ctx, g.id, j.key())
				if err != nil || rs.Requested {
					t.Fatalf("FORK-051: readd request still marked (%+v, %v)", rs, err)
				}
				return nil
			})
			j.wantMessages(g.id)
			j.catchUp(w.ctx, g.id)
			av, _ := a.view(g.id)
			jv, _ := j.view(g.id)
			if av.Epoch != jv.Epoch || !bytes.Equal(av.EpochAuthenticator, jv.EpochAuthenticator) {
				t.Fatalf("after the rejoin the joiner is at epoch %d, the group at %d", jv.Epoch, av.Epoch)
			}
		})
	}
}

// JOIN-092: a Welcome for a group held active, at a later epoch and above
// the cursor, waits for the topic; when the topic, read 3 days after the
// Welcome, still ends below message_cursor and the client processed it
// to that end, the Welcome is rejected and the state is untouched.
func TestJOIN092_TopicNeverReachesTheAnchor(t *testing.T) {
	w := newWorld(t, "sqlite")
	a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{})
	g := member(t, a, j)
	// A former member's second MLS group under the same group id and root.
	b := w.newInst("second group", instOptions{})
	g2 := b.newGroup(groupSpec{root: g.root})
	g2.commitLocal(ports.CommitOptions{ForcePath: true})
	g2.commitLocal(ports.CommitOptions{ForcePath: true})
	ad := g2.add(addSpec{local: true}, j)
	end, _ := a.tr.HighestSequenceID(w.ctx, append([]byte{0}, g.id...))
	b.fill(5)
	seq := g2.sendAt(ad, end+3)
	j.process()
	j.want(seq, "held JOIN-092")
	w.clock.Advance(71 * time.Hour)
	j.retry()
	j.want(seq, "held JOIN-092")
	w.clock.Advance(2 * time.Hour)
	j.retry()
	j.want(seq, "rejected JOIN-092")
	if v, _ := j.view(g.id); !v.Active || v.Epoch != 1 {
		t.Fatalf("the rejected Welcome altered the group: %+v", v)
	}
}

// JOIN-042: state is replaced only when it has ended, by a Welcome whose
// epoch is not less than the held one; at the stored cursor only the
// removal's own epoch and tree hash are accepted.
func TestJOIN042_ReplaceOnlyAnEndedGroup(t *testing.T) {
	t.Run("a readd at the stored cursor joins", func(t *testing.T) {
		w := newWorld(t, "sqlite")
		a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{})
		g := member(t, a, j)
		ad, seq := g.join(j, addSpec{remove: []uint32{g.leafOf(j)}})
		j.process()
		j.want(seq, "joined")
		if gr, _ := j.group(g.id); gr.Cursor != ad.anchor || !gr.Active {
			t.Fatalf("group %+v after the readd", gr)
		}
		j.wantMessages(g.id)
	})
	removed := func(t *testing.T) (*world, *inst, *grp, uint64) {
		w := newWorld(t, "sqlite")
		a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{})
		g := member(t, a, j)
		r := g.commit(ports.CommitOptions{Remove: []uint32{g.leafOf(j)}})
		j.catchUp(w.ctx, g.id)
		if gr, _ := j.group(g.id); gr.Active || gr.Cursor != r {
			t.Fatalf("not removed: %+v", gr)
		}
		return w, j, g, r
	}
	t.Run("at the stored cursor with another tree hash", func(t *testing.T) {
		w, j, g, r := removed(t)
		b := w.newInst("second group", instOptions{})
		g2 := b.newGroup(groupSpec{root: g.root})
		g2.commitLocal(ports.CommitOptions{ForcePath: true})
		ad := g2.add(addSpec{local: true}, j)
		if v, _ := j.view(g.id); v.Removal == nil || v.Removal.Epoch != ad.epoch || bytes.Equal(v.Removal.TreeHash, ad.treeHash) {
			t.Fatalf("removal %+v, want the Welcome's epoch %d under another tree", v.Removal, ad.epoch)
		}
		seq := g2.sendAt(ad, r)
		j.process()
		j.want(seq, "rejected JOIN-042")
		if gr, _ := j.group(g.id); gr.Active {
			t.Fatal("the ended group was replaced by a Welcome that is not its removal's")
		}
	})
	t.Run("an earlier epoch above the cursor", func(t *testing.T) {
		w, j, g, r := removed(t)
		b := w.newInst("second group", instOptions{})
		g2 := b.newGroup(groupSpec{root: g.root})
		ad := g2.add(addSpec{local: true}, j) // epoch 1, the removal's is 2
		seq := g2.sendAt(ad, r+1)
		j.process()
		j.want(seq, "rejected JOIN-042")
	})
	t.Run("an active group is never replaced", func(t *testing.T) {
		w := newWorld(t, "sqlite")
		a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{})
		g := member(t, a, j)
		b := w.newInst("second group", instOptions{})
		g2 := b.newGroup(groupSpec{root: g.root})
		ad := g2.add(addSpec{local: true}, j) // epoch 1, as held
		gr, _ := j.group(g.id)
		seq := g2.sendAt(ad, gr.Cursor+1)
		j.process()
		j.want(seq, "rejected JOIN-042")
		if v, _ := j.view(g.id); !v.Active {
			t.Fatal("the active group was replaced")
		}
	})
}

// JOIN-080: a Welcome for a restored placeholder is a first join: no
// cursor or epoch comparison, the cursor set to message_cursor, the
// imported messages kept.
func TestJOIN080_PlaceholderActivated(t *testing.T) {
	w := newWorld(t, "sqlite")
	a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{})
	g := a.newGroup(groupSpec{})
	j.tx(func(ctx context.Context, tx ports.Tx) error {
		return tx.Groups().Insert(ctx, ports.Group{ID: g.id, ConversationType: ports.ConversationGroup, Consent: ports.ConsentAllowed,
			Active: true, Cursor: 1 << 30, RestoredPlaceholder: true, CreatedAt: t0, UpdatedAt: t0})
	})
	j.addMessage(g.id, 100, "before the removal")
	j.addMessage(g.id, 101, "read before the re-add")
	ad, seq := g.join(j, addSpec{})
	j.process()
	j.want(seq, "joined")
	gr, _ := j.group(g.id)
	if gr.Cursor != ad.anchor || gr.RestoredPlaceholder || gr.Consent != ports.ConsentAllowed || !bytes.Equal(gr.GroupRoot, g.root) {
		t.Fatalf("activated placeholder %+v, want cursor %d and the consent kept", gr, ad.anchor)
	}
	j.wantMessages(g.id)
}
