package acceptance_test

import (
	"testing"

	"github.com/regroup-mls/regroup/internal/world"
)

// COMP-437: a member whose workers run (a started client, as an app runs
// it) commits under two phases: while its commit call waits for the
// decision, the workers leave the commit's intent to the call, so the
// call returns the confirmed commit instead of reading it as lost and
// building the change again until it gives up.
func TestCOMP437_StartedMemberCommitsUnderTwoPhases(t *testing.T) {
	eachDB(t, func(t *testing.T, mode string) {
		g := newGate(t, mode)
		alice, bob, carol := g.Member("alice", world.Config{}), g.Member("bob", world.Config{}), g.Member("carol", world.Config{})
		id := g.group(alice, []*world.Member{bob, carol}, nil)
		for _, m := range []*world.Member{alice, bob, carol} {
			if err := m.C.Start(g.Ctx); err != nil {
				t.Fatal(err)
			}
		}
		e0 := epoch(bob, id)
		const commits = 6
		for i := 0; i < commits; i++ {
			if err := bob.Conv(id).UpdateKeys(g.Ctx); err != nil {
				t.Fatalf("bob's key update %d: %v", i+1, err)
			}
		}
		if got := epoch(bob, id); got != e0+commits {
			t.Fatalf("bob at epoch %d after %d confirmed key updates from %d", got, commits, e0)
		}
		world.SyncAll(alice, bob, carol)
		g.honest(id, nil, alice, bob, carol)
	})
}
