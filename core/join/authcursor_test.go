package join_test

import (
	"context"
	"encoding/binary"
	"math"
	"testing"

	"github.com/regroup-mls/regroup/core/join"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
)

// COMP-290: the welcome cursor moves only over Welcomes whose join
// validation authenticated a member of the group. An operator that fetched
// the installation's key package and sealed payloads to it at extreme ids
// (junk that opens, a real Welcome for another key package that opens but
// does not stage, and a signed Welcome whose membership does not verify)
// does not move it, and a later honest Welcome, whose
// id is lower, still installs.
func TestCOMP290_SealedJunkDoesNotMoveTheWelcomeCursor(t *testing.T) {
	w := newWorld(t, "sqlite")
	a := w.newInst("adder", instOptions{})
	j, f := newInjected(w)
	_, first := a.newGroup(groupSpec{}).join(j, addSpec{})
	j.process()
	j.want(first, "joined")
	r := recipientOf(a.validated(j))
	f.inject(math.MaxInt64-1, a.inline(r, r.Wrapper, r.Wrapper, []byte{0, 1, 0, 0xff, 0xff}))
	stranger := w.newInst("stranger", instOptions{})
	other := a.newGroup(groupSpec{}).add(addSpec{}, stranger)
	f.inject(math.MaxInt64, a.inline(r, r.Wrapper, r.Wrapper, other.welcome, meta(other.anchor)))
	// A signed Welcome that stages here but whose membership section 8
	// refuses (the adder's identity reference is 0) did not authenticate
	// either.
	unverified := a.newGroup(groupSpec{}).add(addSpec{edit: func(mem memberships, d metadata.Dictionary) metadata.Dictionary {
		mem[a.inbox()].SequenceId = 0
		return d.Set(metadata.ComponentGroupMembership, metadata.EncodeMembership(mem))
	}}, j)
	u := unverified.recipients[0]
	f.inject(math.MaxInt64-2, a.inline(u, u.Wrapper, u.Wrapper, unverified.welcome, meta(unverified.anchor)))
	j.process()
	j.want(math.MaxInt64-1, "rejected JOIN-026")
	j.want(math.MaxInt64-2, "rejected JOIN-050")
	if c := j.cursor(); c != first {
		t.Fatalf("cursor %d after sealed junk at extreme ids, want %d (the last Welcome that authenticated)", c, first)
	}
	_, second := a.newGroup(groupSpec{}).join(j, addSpec{})
	j.process()
	j.want(second, "joined")
	if c := j.cursor(); c != second {
		t.Fatalf("cursor %d, want %d", c, second)
	}
	// A restart re-reads the sealed junk once; it stays decided.
	j.reopen()
	_, third := a.newGroup(groupSpec{}).join(j, addSpec{})
	j.process()
	j.want(third, "joined")
}

// COMP-291: a valid Welcome from an inbox the operator created itself is
// authenticated and moves the cursor, even to an extreme id; an honest
// Welcome the operator then places below it is not read by the passes
// from the cursor, but the pass after the rescan interval re-reads from
// the low-water mark, which that one Welcome did not move, and installs
// it, reading only what lies above the mark.
func TestCOMP291_OperatorInboxWelcomeIsRecoveredFromTheLowWaterMark(t *testing.T) {
	w := newWorld(t, "sqlite")
	a := w.newInst("adder", instOptions{})
	op := w.newInst("operator", instOptions{})
	j, f := newInjected(w)
	_, first := a.newGroup(groupSpec{}).join(j, addSpec{})
	j.process()
	_, second := a.newGroup(groupSpec{}).join(j, addSpec{})
	j.process()
	j.want(second, "joined")
	const pushed = math.MaxInt64 - 5
	ad := op.newGroup(groupSpec{}).add(addSpec{}, j)
	f.inject(pushed, op.inline(ad.recipients[0], ad.recipients[0].Wrapper, ad.recipients[0].Wrapper, ad.welcome, meta(ad.anchor)))
	j.process()
	j.want(pushed, "joined")
	if c := j.cursor(); c != pushed {
		t.Fatalf("cursor %d, want %d: a valid Welcome from the operator's own inbox authenticates", c, pushed)
	}
	floor, err := j.rcv.Floor(w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if floor > second || floor < first {
		t.Fatalf("low-water mark %d, want between %d and %d (below the pushed Welcome)", floor, first, second)
	}
	_, hidden := a.newGroup(groupSpec{}).join(j, addSpec{})
	j.process()
	if s := j.state(hidden); s == "joined" {
		t.Fatalf("welcome %d below the cursor was read before the rescan: %s", hidden, s)
	}
	f.count()
	w.clock.Advance(join.DefaultRescanInterval)
	j.process()
	j.want(hidden, "joined")
	if n := f.count(); n > 4 {
		t.Fatalf("the rescan read %d envelopes, want only those above the low-water mark", n)
	}
	// The rescan ran: the next pass reads from the cursor again.
	_, later := a.newGroup(groupSpec{}).join(j, addSpec{})
	j.process()
	if s := j.state(later); s == "joined" {
		t.Fatalf("welcome %d read twice in one interval", later)
	}
	w.clock.Advance(join.DefaultRescanInterval)
	j.process()
	j.want(later, "joined")
}

// COMP-291: a store written before the low-water mark existed holds only
// the cursor, which the earlier rule may have moved over sealed junk at an
// extreme id. It loads as a mark of 0, and its first pass re-reads the
// topic once from there, so a Welcome hidden below that cursor installs.
func TestCOMP291_StoreWithoutTheMarkLoads(t *testing.T) {
	w := newWorld(t, "sqlite")
	a := w.newInst("adder", instOptions{})
	j := w.newInst("joiner", instOptions{})
	_, first := a.newGroup(groupSpec{}).join(j, addSpec{})
	j.process()
	j.want(first, "joined")
	_, hidden := a.newGroup(groupSpec{}).join(j, addSpec{})
	// The recorded state of the earlier format: the cursor alone, moved to
	// an extreme id; no floor, high or rescan.
	j.tx(func(ctx context.Context, tx ports.Tx) error {
		for _, k := range []string{"floor", "high", "rescan"} {
			if err := tx.Blobs().Delete(ctx, "regroup/join", k); err != nil {
				return err
			}
		}
		return tx.Blobs().Put(ctx, "regroup/join", "cursor", binary.BigEndian.AppendUint64(nil, math.MaxInt64))
	})
	j.reopen()
	j.process()
	j.want(hidden, "joined")
	if c := j.cursor(); c != math.MaxInt64 {
		t.Fatalf("cursor %d, want the stored %d (a cursor never moves down)", c, uint64(math.MaxInt64))
	}
}
