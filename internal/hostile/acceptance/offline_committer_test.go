package acceptance_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// COMP-437: a committer that stopped waiting (its context ended) and
// was away while its commit was confirmed reads the commit and its
// confirmation in one pass and merges it: it is not stuck.
func TestCOMP437_CommitterAwayDuringItsConfirmationMerges(t *testing.T) {
	eachDB(t, func(t *testing.T, mode string) {
		g := newGate(t, mode)
		alice, bob, carol := g.Member("alice", world.Config{}), g.Member("bob", world.Config{}), g.Member("carol", world.Config{})
		id := g.group(alice, []*world.Member{bob, carol}, nil)
		e0 := epoch(bob, id)
		ctx, cancel := context.WithTimeout(g.Ctx, 300*time.Millisecond)
		err := bob.Conv(id).UpdateKeys(ctx)
		cancel()
		if !errors.Is(err, client.ErrCommitAwaiting) {
			t.Fatalf("bob's key update with a short context: %v, want ErrCommitAwaiting", err)
		}
		world.Round(alice, carol) // the witnesses report; bob is away
		g.notice(alice, id, 0, backendpb.AcceptanceNotice_CONFIRMED)
		bob.Sync()
		if got := epoch(bob, id); got != e0+1 {
			t.Fatalf("bob at epoch %d after his confirmed commit, want %d", got, e0+1)
		}
		g.honest(id, nil, alice, bob, carol)
	})
}
