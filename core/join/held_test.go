package join_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/aead"
	"github.com/regroup-mls/regroup/adapters/hpkewrap"
	"github.com/regroup-mls/regroup/adapters/pqwrap"
	"github.com/regroup-mls/regroup/core/algorithm"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
)

func (in *inst) heldOne(seq uint64) ports.HeldWelcome {
	in.w.t.Helper()
	hs, err := in.rcv.Held(in.w.ctx)
	if err != nil {
		in.w.t.Fatal(err)
	}
	for _, h := range hs {
		if h.SequenceID == seq {
			return h
		}
	}
	in.w.t.Fatalf("%s: welcome %d is not held (%s)", in.name, seq, in.state(seq))
	return ports.HeldWelcome{}
}

// classicalOnly is a registry without X-Wing: what a client that lost
// its plugin, or predates the algorithm, holds.
func classicalOnly(t testing.TB) *algorithm.Registry {
	reg, err := algorithm.New(hpkewrap.NewCurve25519(), aead.NewChaCha20Poly1305())
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// JOIN-087, JOIN-063: a Welcome under a wrapper algorithm the client does
// not support is held 1 day from the first encounter; retries and a
// restart never move that deadline; after it a still unreadable Welcome
// is rejected, and one the client can read by then joins.
func TestJOIN087_UnsupportedHeldForOneDay(t *testing.T) {
	for _, upgrade := range []bool{false, true} {
		name := map[bool]string{false: "still unsupported at the deadline", true: "supported again before the deadline"}[upgrade]
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "sqlite")
			a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{})
			j.opts.Registry = classicalOnly(t)
			j.setup()
			_, seq := a.newGroup(groupSpec{}).join(j, addSpec{})
			j.process()
			h := j.heldOne(seq)
			want := t0.Add(24 * time.Hour)
			if h.Deadline != want {
				t.Fatalf("deadline %v, want 1 day after the first encounter %v", h.Deadline, want)
			}
			w.clock.Advance(12 * time.Hour)
			j.retry()
			j.reopen()
			j.retry()
			if h := j.heldOne(seq); h.Deadline != want || h.Attempts != 3 {
				t.Fatalf("after retries and a restart: deadline %v (want %v), attempts %d", h.Deadline, want, h.Attempts)
			}
			if upgrade {
				j.opts.Registry = nil
				j.setup()
			}
			w.clock.Advance(13 * time.Hour)
			j.retry()
			if upgrade {
				j.want(seq, "joined")
			} else {
				j.want(seq, "rejected JOIN-087")
			}
		})
	}
}

// JOIN-084: a Welcome whose key material is missing is held under the
// unreadable policy; the retry after the deadline uses the current keys
// and joins when they are back, and rejects when they are not.
func TestJOIN084_MissingKeysRetriedWithCurrentKeys(t *testing.T) {
	for _, restored := range []bool{false, true} {
		t.Run(map[bool]string{false: "never restored", true: "restored after the deadline"}[restored], func(t *testing.T) {
			w := newWorld(t, "sqlite")
			a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{})
			recs := j.records()
			kp := recs[len(recs)-1]
			j.tx(func(ctx context.Context, tx ports.Tx) error {
				return tx.KeyPackages().Update(ctx, kp.Ref, func(r *ports.KeyPackageRecord) error {
					r.WrapperPrivateKey = nil // lost: no post-quantum private key for the package
					return nil
				})
			})
			_, seq := a.newGroup(groupSpec{}).join(j, addSpec{})
			j.process()
			if h := j.heldOne(seq); h.Deadline != t0.Add(24*time.Hour) {
				t.Fatalf("held %+v, want a 1-day deadline", h)
			}
			w.clock.Advance(30 * time.Hour)
			if restored {
				j.tx(func(ctx context.Context, tx ports.Tx) error {
					return tx.KeyPackages().Update(ctx, kp.Ref, func(r *ports.KeyPackageRecord) error {
						r.WrapperPrivateKey = kp.WrapperPrivateKey
						return nil
					})
				})
			}
			j.retry()
			if restored {
				j.want(seq, "joined")
			} else {
				j.want(seq, "rejected JOIN-084")
			}
		})
	}
}

func (in *inst) records() []ports.KeyPackageRecord {
	var recs []ports.KeyPackageRecord
	in.tx(func(ctx context.Context, tx ports.Tx) (err error) {
		recs, err = tx.KeyPackages().List(ctx)
		return err
	})
	return recs
}

// JOIN-063: a change of failure reason never moves a deadline later: a
// Welcome held for missing keys and then for an unsupported algorithm
// keeps the first deadline.
func TestJOIN063_DeadlineNeverMovesLater(t *testing.T) {
	w := newWorld(t, "sqlite")
	a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{})
	recs := j.records()
	kp := recs[len(recs)-1]
	j.tx(func(ctx context.Context, tx ports.Tx) error {
		return tx.KeyPackages().Update(ctx, kp.Ref, func(r *ports.KeyPackageRecord) error { r.WrapperPrivateKey = nil; return nil })
	})
	_, seq := a.newGroup(groupSpec{}).join(j, addSpec{})
	j.process()
	first := j.heldOne(seq).Deadline
	w.clock.Advance(20 * time.Hour)
	j.tx(func(ctx context.Context, tx ports.Tx) error {
		return tx.KeyPackages().Update(ctx, kp.Ref, func(r *ports.KeyPackageRecord) error { r.WrapperPrivateKey = kp.WrapperPrivateKey; return nil })
	})
	j.opts.Registry = classicalOnly(t)
	j.reopen()
	j.retry()
	h := j.heldOne(seq)
	if h.Deadline != first || h.Reason[:8] != "JOIN-087" {
		t.Fatalf("held for %q until %v, want the first deadline %v kept", h.Reason, h.Deadline, first)
	}
	w.clock.Advance(5 * time.Hour)
	j.retry()
	j.want(seq, "rejected JOIN-087")
}

// JOIN-094, JOIN-035: a well-formed pointer whose pointee is not on its
// topic is held until 3 days after the pointer's timestamp, then
// rejected with no group state; a pointee that appears in time joins.
func TestJOIN094_UnresolvedPointerHeldThreeDays(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(map[bool]string{false: "never published", true: "published on day 2"}[late], func(t *testing.T) {
			w := newWorld(t, "sqlite")
			a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{})
			g := a.newGroup(groupSpec{})
			ad := g.add(addSpec{}, j)
			k := newPointeeKeys()
			seq := a.publish(a.pointerFor(ad.recipients[0], k.pointer()))[0]
			j.process()
			if h := j.heldOne(seq); h.Deadline != t0.Add(72*time.Hour) {
				t.Fatalf("held %+v, want 3 days after the pointer's timestamp", h)
			}
			w.clock.Advance(48 * time.Hour)
			j.retry()
			j.want(seq, "held JOIN-094")
			if late {
				a.publish(a.pointee(k, ports.WrapperSymmetricKey, ad.welcome, meta(ad.anchor)))
			}
			w.clock.Advance(24 * time.Hour)
			j.retry()
			if late {
				j.want(seq, "joined")
				return
			}
			j.want(seq, "rejected JOIN-094")
			if _, ok := j.group(g.id); ok {
				t.Fatal("JOIN-035: an unresolved pointer installed group state")
			}
			if _, ok := j.view(g.id); ok {
				t.Fatal("JOIN-035: an unresolved pointer left engine state")
			}
		})
	}
}

// flaky fails its first n calls with err, then passes through.
type flakyIdentity struct {
	ports.Identity
	n atomic.Int32
}

func (f *flakyIdentity) AssociationState(ctx context.Context, inbox string, seq uint64) (ports.AssociationState, error) {
	if f.n.Add(-1) >= 0 {
		return ports.AssociationState{}, ports.ErrUnavailable
	}
	return f.Identity.AssociationState(ctx, inbox, seq)
}

type flakyWrapper struct {
	ports.WrapperAlgorithm
	n atomic.Int32
}

func (f *flakyWrapper) Open(ctx context.Context, priv, info []byte, sealed ...[]byte) ([][]byte, error) {
	if f.n.Add(-1) >= 0 {
		return nil, ports.ErrAlgorithmUnavailable
	}
	return f.WrapperAlgorithm.Open(ctx, priv, info, sealed...)
}

// JOIN-085: a failure of a local operation (an unavailable plugin, an
// identity fetch that fails) keeps the Welcome for a retry, never
// rejects it, and does not set a deadline.
func TestJOIN085_LocalFailuresAreRetried(t *testing.T) {
	t.Run("plugin unavailable", func(t *testing.T) {
		w := newWorld(t, "sqlite")
		fw := &flakyWrapper{WrapperAlgorithm: pqwrap.NewXWing()}
		fw.n.Store(2)
		reg, _ := algorithm.New(hpkewrap.NewCurve25519(), fw, aead.NewChaCha20Poly1305())
		a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{Registry: reg})
		_, seq := a.newGroup(groupSpec{}).join(j, addSpec{})
		if err := j.rcv.Process(w.ctx); !errors.Is(err, ports.ErrAlgorithmUnavailable) {
			t.Fatalf("process: %v, want the local failure reported", err)
		}
		if h := j.heldOne(seq); !h.Deadline.IsZero() || h.Reason[:8] != "JOIN-085" {
			t.Fatalf("held %+v, want a retry without deadline", h)
		}
		w.clock.Advance(30 * 24 * time.Hour)
		_ = j.rcv.RetryHeld(w.ctx)
		j.retry()
		j.want(seq, "joined")
	})
	t.Run("identity unavailable", func(t *testing.T) {
		w := newWorld(t, "sqlite")
		fi := &flakyIdentity{}
		fi.n.Store(1)
		a := w.newInst("adder", instOptions{})
		j := w.newInst("joiner", instOptions{Identity: func(id ports.Identity) ports.Identity { fi.Identity = id; return fi }})
		_, seq := a.newGroup(groupSpec{}).join(j, addSpec{})
		_ = j.rcv.Process(w.ctx)
		j.want(seq, "held JOIN-085")
		j.retry()
		j.want(seq, "joined")
	})
}

// JOIN-018: while a Welcome is held, no superseded key package's keys are
// destroyed; once it is rejected they are.
func TestJOIN018_HeldWelcomeKeepsKeyMaterial(t *testing.T) {
	w := newWorld(t, "sqlite")
	a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{})
	g := a.newGroup(groupSpec{edit: laterVersion})
	_, seq := g.join(j, addSpec{})
	if _, err := j.mgr.Rotate(w.ctx); err != nil {
		t.Fatal(err)
	}
	j.process()
	j.want(seq, "held JOIN-057")
	w.clock.Advance(48 * time.Hour)
	if n, err := j.mgr.DestroySuperseded(w.ctx); err != nil || n != 0 {
		t.Fatalf("destroyed %d packages (%v) while a Welcome is held", n, err)
	}
	j.retry()
	j.want(seq, "held JOIN-057")
	// The upgrade arrives: the Welcome joins with the superseded package's
	// keys, and only then are they destroyed.
	j.opts.Version.Major, j.opts.Version.Minor = 1, 7
	j.setup()
	j.retry()
	j.want(seq, "joined")
	if n, err := j.mgr.DestroySuperseded(w.ctx); err != nil || n != 1 {
		t.Fatalf("destroyed %d packages (%v) after the Welcome completed, want 1", n, err)
	}
}

func laterVersion(d metadata.Dictionary) metadata.Dictionary {
	return d.Set(metadata.ComponentMinProtocol, []byte("1.7.0"))
}

// COMP-162, COMP-163: a flood of unreadable Welcomes holds no more than
// MaxHeld; the oldest are rejected (PROC-020) and never held again, and
// the rejection records keep the newest MaxRejected.
func TestHeldQueueIsBounded(t *testing.T) {
	w := newWorld(t, "sqlite")
	a := w.newInst("adder", instOptions{})
	j := w.newInst("joiner", instOptions{MaxHeld: 3, MaxRejected: 2})
	ad := a.newGroup(groupSpec{}).add(addSpec{}, j)
	r := ad.recipients[0]
	wr, _ := a.reg.Wrapper(ports.WrapperXWingMLKEM768Draft6)
	var seqs []uint64
	for i := 0; i < 6; i++ {
		r.WrapperPublicKey, _, _ = wr.GenerateKey(w.ctx) // keys this installation never held
		seqs = append(seqs, a.publish(a.inline(r, ports.WrapperXWingMLKEM768Draft6, ports.WrapperXWingMLKEM768Draft6, ad.welcome, meta(ad.anchor)))[0])
	}
	j.process()
	held, _ := j.rcv.Held(w.ctx)
	if len(held) != 3 || held[0].SequenceID != seqs[3] {
		t.Fatalf("%d held from %d, want the newest 3", len(held), held[0].SequenceID)
	}
	rej, _ := j.rcv.Rejected(w.ctx)
	if len(rej) != 2 || rej[0].SequenceID != seqs[1] || rej[1].SequenceID != seqs[2] || rej[1].Rule != "PROC-020" {
		t.Fatalf("rejection records %+v, want the newest two of the three evicted", rej)
	}
	// Read again from the start: nothing decided is held again.
	j.tx(func(ctx context.Context, tx ports.Tx) error { return tx.Blobs().Delete(ctx, "regroup/join", "cursor") })
	j.process()
	if again, _ := j.rcv.Held(w.ctx); len(again) != 3 {
		t.Fatalf("%d held after a re-read", len(again))
	}
}
