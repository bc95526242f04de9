package commitlog_test

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// FORK-083: the boundary tested is the last accepted entry's author's,
// not the candidate's. c was readded after a's last accepted entry, so
// c's boundary lies between that entry and c's candidate; a is still a
// publisher with boundary 0, so the full chain applies and c's entry that
// does not continue a's chain is discarded.
func TestFORK083_BoundaryIsTheLastAuthorsNotTheCandidates(t *testing.T) {
	t.Parallel()
	w, a, b, c, _ := hostileGroup(t)
	w.g.admins = []string{"inbox-a", "inbox-c"}
	all := []*client{a, b, c}
	step := func(extra ...func(*commitlog.Merge)) uint64 {
		s := w.commit(nil)
		for _, m := range all {
			m.merge(s, extra...)
		}
		return s
	}
	s1 := step()
	a.publish()
	b.read()
	s2 := step(func(m *commitlog.Merge) { m.Readded = [][]byte{c.pub} })
	s3 := step()
	publishRaw(t, w, sealAs(t, w.g.keys, entryFor(w, s3, []byte("not a's chain"), w.g.auth, 77), c.priv))
	b.read()
	if got := remoteSeqs(b.remote()); !eq(got, []uint64{s1}) {
		t.Fatalf("accepted %v: c's entry must chain on a's (a's boundary 0, c's %d)", got, s2)
	}
	if b.log.Counters()[commitlog.ReasonChain] != 1 {
		t.Fatalf("counters %v, want one chain discard", b.log.Counters())
	}
}

// FORK-088: for an existing conversation without a floor, the floor is
// set to the epoch before the first merge, not to the epoch a later read
// finds: entries at the pre-merge epoch stay admissible.
func TestFORK088_FloorSetBeforeTheFirstMerge(t *testing.T) {
	t.Parallel()
	w := newWorld(t, ports.ConversationGroup)
	w.g.admins = []string{"inbox-a"}
	a, b := w.newClient("a", "inbox-a"), w.newClient("b", "inbox-b")
	w.g.members = []member{{a.inbox, a.pub}, {b.inbox, b.pub}}
	a.join(0)
	w.pad(5)
	var seqs []uint64
	for i := 0; i < 3; i++ {
		s := w.commit(nil)
		a.merge(s)
		seqs = append(seqs, s)
	}
	// b holds an existing conversation at epoch 4 (after seqs[2]) with no
	// floor recorded.
	b.view, b.joined = w.g.viewFor(b), true
	b.tx(func(tx ports.Tx) error {
		return tx.Groups().Insert(w.ctx, ports.Group{ID: w.g.keys.GroupID, ConversationType: ports.ConversationGroup, Consent: ports.ConsentAllowed,
			Active: true, Cursor: seqs[2], GroupRoot: w.g.root})
	})
	s4 := w.commit(nil)
	a.merge(s4)
	b.merge(s4) // the first merge: the floor is the epoch before it, 4
	a.publish() // entries at epochs 2, 3, 4, 5
	b.read()
	if got := remoteSeqs(b.remote()); !eq(got, []uint64{seqs[2], s4}) || b.log.Counters()[commitlog.ReasonBelowFloor] != 2 {
		t.Fatalf("accepted %v (counters %v), want the entries at epochs 4 and 5", got, b.log.Counters())
	}
	b.wantFork(ports.ForkNotForked)
}

// FORK-089: the Welcome row of the boundary-initialization table: every
// current publisher's boundary becomes the Welcome's message_cursor, even
// below a higher earlier boundary, and earlier boundaries of others are
// cleared. An entry at or after that cursor then starts a new chain after
// an accepted entry from before it.
func TestFORK089_WelcomeSetsBoundariesToItsCursor(t *testing.T) {
	t.Parallel()
	w, a, b, c, _ := hostileGroup(t)
	w.g.admins = []string{"inbox-a", "inbox-c"}
	step := func(extra ...func(*commitlog.Merge)) uint64 {
		s := w.commit(nil)
		for _, m := range []*client{a, b, c} {
			m.merge(s, extra...)
		}
		return s
	}
	s1 := step()
	a.publish()
	b.read()
	s2 := step()
	s3 := step(func(m *commitlog.Merge) { m.Readded = [][]byte{a.pub, c.pub} })
	w.g.admins = []string{"inbox-a"} // c is no publisher in the Welcome's state
	// b's state is replaced by a Welcome whose message_cursor is s2.
	b.view = w.g.viewFor(b)
	b.tx(func(tx ports.Tx) error { return b.log.BeginMembership(w.ctx, tx, w.g.keys.GroupID, b.view, s2) })
	var bounds map[string]uint64
	b.tx(func(tx ports.Tx) error {
		var err error
		bounds, err = tx.ReaderAdmission().Boundaries(w.ctx, w.g.keys.GroupID)
		return err
	})
	want := map[string]uint64{}
	for _, m := range w.g.members {
		for _, ad := range w.g.admins {
			if m.inbox == ad {
				want[string(m.key)] = s2
			}
		}
	}
	if len(bounds) != len(want) || bounds[string(a.pub)] != want[string(a.pub)] {
		t.Fatalf("boundaries %v after the Welcome, want %v (a at %d, c cleared; not %d)", bounds, want, s2, s3)
	}
	// a's entry at s2 does not continue a:s1, but s1 is before a's
	// boundary and s2 is at it: a new chain.
	publishRaw(t, w, sealAs(t, w.g.keys, entryFor(w, s2, []byte("new chain"), bytes.Repeat([]byte{7}, 32), 50), a.priv))
	b.read()
	if got := remoteSeqs(b.remote()); !eq(got, []uint64{s1, s2}) {
		t.Fatalf("accepted %v, want %d to start a chain at the Welcome's cursor", got, s2)
	}
}

// FORK-087: the floor is checked before the hold. An entry below the
// floor that names a commit the reader has not processed is discarded at
// once, and does not hold the honest entries after it.
func TestFORK087_FloorBeforeHold(t *testing.T) {
	t.Parallel()
	w, a, b, _, _ := hostileGroup(t)
	var seqs []uint64
	for i := 0; i < 4; i++ {
		s := w.commit(nil)
		a.merge(s)
		b.merge(s)
		seqs = append(seqs, s)
	}
	b.tx(func(tx ports.Tx) error { return tx.ReaderAdmission().SetFloor(w.ctx, w.g.keys.GroupID, 4) })
	// A stale entry from a's divergent branch at epoch 2, naming the next
	// commit, which b has not processed.
	publishRaw(t, w, sealAs(t, w.g.keys, entryFor(w, w.g.seq+1, nil, randAuth(), 2), a.priv))
	a.publish() // epochs 2..5
	rep := b.read()
	if rep.Held != 0 || !eq(remoteSeqs(b.remote()), seqs[2:]) {
		t.Fatalf("read %+v accepted %v (counters %v): want the stale entry discarded and epochs 4, 5 accepted", rep, remoteSeqs(b.remote()), b.log.Counters())
	}
	if n := b.log.Counters()[commitlog.ReasonBelowFloor]; n != 3 {
		t.Fatalf("below_floor %d, want 3", n)
	}
}

// FORK-085: a commit that removes and adds this installation back restarts
// its publishing eligibility: entries it recorded before, never published,
// are not published after it.
func TestFORK085_SelfReaddRestartsEligibility(t *testing.T) {
	t.Parallel()
	w, cs := groupOf(t, []string{"inbox-a"}, "a", "b")
	a, b := cs[0], cs[1]
	step := func(extra ...func(*commitlog.Merge)) uint64 {
		s := w.commit(nil)
		a.merge(s, extra...)
		b.merge(s, extra...)
		return s
	}
	s1 := step()
	a.publish()
	step()
	step()
	s4 := step(func(m *commitlog.Merge) { m.Readded = [][]byte{a.pub} })
	s5 := step()
	a.publish()
	if got := commitLogSeqs(w); !eq(got, []uint64{s1, s4, s5}) {
		t.Fatalf("published %v, want %d, then %d and %d from the readd on", got, s1, s4, s5)
	}
}

// FORK-021: a publish response that confirms an entry, not the one after
// it, and then a later one again confirms only the first: the gap is
// published again, in order, before anything later.
func TestFORK021_NoConfirmationAfterAGap(t *testing.T) {
	t.Parallel()
	w := newWorld(t, ports.ConversationGroup)
	w.g.admins = []string{"inbox-a"}
	var fl *flaky
	a := w.newClient("a", "inbox-a", func(o *commitlog.Options) {
		fl = &flaky{Transport: o.Transport, zeroAt: -1, zeroOnly: -1}
		o.Transport = fl
	})
	w.g.members = []member{{a.inbox, a.pub}}
	a.join(0)
	w.pad(10)
	var want []uint64
	for i := 0; i < 3; i++ {
		s := w.commit(nil)
		a.merge(s)
		want = append(want, s)
	}
	fl.zeroOnly = 1 // the second entry's sequence id is missing, the third's is not
	rep, err := a.log.Publish(w.ctx, w.g.keys.GroupID)
	if err == nil || rep.Published != 1 || rep.ConfirmedThrough != 1 {
		t.Fatalf("first pass %+v %v: want only the first entry confirmed", rep, err)
	}
	a.publish()
	// The delivery service stores a republished entry once (COMP-144), so
	// the requests show the republication and the topic shows no gap.
	if got := fl.sentSeqs(t, w); !eq(got, []uint64{want[0], want[1], want[2], want[1], want[2]}) {
		t.Fatalf("sent %v: the unconfirmed entry and everything after it must go out again", got)
	}
	if got := commitLogSeqs(w); !eq(got, want) {
		t.Fatalf("topic %v, want %v", got, want)
	}
}

// sentSeqs returns the commit sequence ids of the entries the client sent,
// in the order of its requests.
func (f *flaky) sentSeqs(t *testing.T, w *world) []uint64 {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []uint64
	for _, b := range f.sent {
		var env backendpb.ClientEnvelope
		if err := proto.Unmarshal(b, &env); err != nil {
			t.Fatal(err)
		}
		p, err := commitlog.Open(w.g.keys, w.g.keys.GroupID, &backendpb.OriginatorEnvelope{SequenceId: 1 << 40, Envelope: &env})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.CommitSequenceId)
	}
	return out
}

// FORK-086: legacy recovery runs before the first merge recorded after an
// upgrade, against the state before it. Legacy history recorded while
// this installation was no publisher stays unpublished when the first
// merge promotes it; only the promoting commit's entry and later ones go
// out.
func TestFORK086_RecoveryRunsBeforeTheFirstMerge(t *testing.T) {
	t.Parallel()
	w := newWorld(t, ports.ConversationGroup)
	w.g.admins = []string{"inbox-z"}
	a := w.newClient("a", "inbox-a")
	w.g.members = []member{{a.inbox, a.pub}}
	w.pad(10)
	auth := [][]byte{randAuth(), randAuth(), randAuth()}
	w.g.epoch, w.g.auth, w.g.seq = 2, auth[2], 3
	a.view, a.joined = w.g.viewFor(a), true
	a.tx(func(tx ports.Tx) error {
		if err := tx.Groups().Insert(w.ctx, ports.Group{ID: w.g.keys.GroupID, ConversationType: ports.ConversationGroup,
			Consent: ports.ConsentAllowed, Active: true, Cursor: 3, GroupRoot: w.g.root}); err != nil {
			return err
		}
		for i, cs := range []uint64{2, 3} {
			if _, _, err := tx.LocalCommitLog().Append(w.ctx, ports.LocalCommitLogEntry{GroupID: w.g.keys.GroupID,
				CommitSequenceID: cs, CommitResult: ports.CommitResultApplied, LastEpochAuthenticator: auth[i],
				AppliedEpochNumber: uint64(i + 1), AppliedEpochAuthenticator: auth[i+1], Legacy: true,
				ChangeClass: ports.ChangeKeyUpdate, RoleEvidence: true}); err != nil {
				return err
			}
		}
		return nil
	})
	s := w.commit(func(g *groupModel) { g.admins = append(g.admins, "inbox-a") })
	a.merge(s)
	a.publish()
	if got := commitLogSeqs(w); !eq(got, []uint64{s}) {
		t.Fatalf("published %v, want only the promoting commit %d", got, s)
	}
}
