package join_test

import (
	"context"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// hanging is an identity source that does not answer for one inbox until
// it is released.
type hanging struct {
	ports.Identity
	inbox   string
	release chan struct{}
}

func (h *hanging) AssociationState(ctx context.Context, inbox string, seq uint64) (ports.AssociationState, error) {
	if inbox == h.inbox {
		select {
		case <-h.release:
		case <-ctx.Done():
			return ports.AssociationState{}, ctx.Err()
		}
	}
	return h.Identity.AssociationState(ctx, inbox, seq)
}

// hangingBatch is the same source answering many requests at once, as
// identity.Resolver does: a batch that names the inbox hangs.
type hangingBatch struct{ *hanging }

func (h hangingBatch) AssociationStates(ctx context.Context, reqs []ports.IdentityRequest) ([]ports.IdentityResult, error) {
	for _, r := range reqs {
		if r.InboxID == h.inbox {
			select {
			case <-h.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	return h.Identity.(ports.BatchIdentity).AssociationStates(ctx, reqs)
}

// processWithin runs a welcome pass and fails the test when it does not
// return within limit: a pass that waits on a lookup that never answers.
func (in *inst) processWithin(limit time.Duration) { in.within(limit, in.rcv.Process) }

// within runs a pass and fails the test when it does not return within
// limit. Its error is a held Welcome's (JOIN-085) and is not checked.
func (in *inst) within(limit time.Duration, pass func(context.Context) error) {
	in.w.t.Helper()
	done := make(chan error, 1)
	go func() { done <- pass(in.w.ctx) }()
	select {
	case <-done:
	case <-time.After(limit):
		in.w.t.Fatalf("%s: the welcome pass did not return within %v", in.name, limit)
	}
}

// JOIN-085, JOIN-051, COMP-255: a Welcome whose membership names an inbox
// whose identity lookup hangs does not stall the others: the pass waits a
// bounded time once, holds that Welcome for a retry and joins the rest;
// once the lookup answers, the retry joins it.
func TestJOIN085_HangingIdentityLookupDoesNotStallOthers(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(map[bool]string{false: "one lookup per inbox", true: "batched lookups"}[batch], func(t *testing.T) {
			hangingLookup(t, batch)
		})
	}
}

func hangingLookup(t *testing.T, batch bool) {
	w := newWorld(t, "sqlite")
	a, s := w.newInst("adder", instOptions{}), w.newInst("stranger", instOptions{})
	h := &hanging{inbox: s.inbox(), release: make(chan struct{})}
	t.Cleanup(func() {
		select {
		case <-h.release:
		default:
			close(h.release)
		}
	})
	j := w.newInst("joiner", instOptions{IdentityTimeout: 500 * time.Millisecond,
		Identity: func(id ports.Identity) ports.Identity {
			h.Identity = id
			if batch {
				return hangingBatch{h}
			}
			return h
		}})
	_, slow1 := s.newGroup(groupSpec{}).join(j, addSpec{})
	_, slow2 := s.newGroup(groupSpec{}).join(j, addSpec{})
	_, fast := a.newGroup(groupSpec{}).join(j, addSpec{})
	j.processWithin(30 * time.Second)
	// A loaded machine can make an honest lookup miss the bound too; the
	// next passes take it, while the hanging one still hangs.
	for i := 0; i < 5 && j.state(fast) != "joined"; i++ {
		j.within(30*time.Second, j.rcv.RetryHeld)
	}
	j.want(slow1, "held JOIN-085")
	j.want(slow2, "held JOIN-085")
	j.want(fast, "joined")
	close(h.release)
	deadline := time.Now().Add(10 * time.Second)
	for j.state(slow2) != "joined" && time.Now().Before(deadline) {
		_ = j.rcv.RetryHeld(w.ctx)
	}
	j.want(slow1, "joined")
	j.want(slow2, "joined")
}
