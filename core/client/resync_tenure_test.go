package client_test

import (
	"testing"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/mlsfault"
)

// FORK-089, COMP-401: a super admin's resync removes its installation and
// adds it back in one commit, so the members' readers start its new chain
// there; without that boundary its later entries break the chain and
// every member reads unknown for ever.
func TestFORK089_SuperAdminResyncStartsNewTenure(t *testing.T) {
	world.Each(t, world.Networked, func(t *testing.T, w *world.World) {
		alice, bob := rawMember(w, "alice", nil), rawMember(w, "bob", nil)
		g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Members: []string{bob.C.InboxID()}})
		if err != nil {
			t.Fatal(err)
		}
		id := g.ID()
		bob.Sync()
		if err := bob.Conv(id).SetConsent(w.Ctx, ports.ConsentAllowed); err != nil {
			t.Fatal(err)
		}
		if err := g.SetName(w.Ctx, "zero"); err != nil {
			t.Fatal(err)
		}
		syncAll(alice, bob)
		alice.Engine.Arm(id, mlsfault.DivergeAfterMerge)
		if err := bob.Conv(id).UpdateKeys(w.Ctx); err != nil {
			t.Fatal(err)
		}
		syncAll(alice, bob)
		if err := bob.Conv(id).UpdateKeys(w.Ctx); err != nil {
			t.Fatal(err)
		}
		syncAll(alice, bob)
		if _, err := alice.Conv(id).Resync(w.Ctx); err != nil {
			t.Fatalf("resync: %v", err)
		}
		syncAll(alice, bob)
		world.Agree(t, id, alice, bob)
		for _, name := range []string{"three", "four"} {
			if err := alice.Conv(id).SetName(w.Ctx, name); err != nil {
				t.Fatal(err)
			}
			syncAll(alice, bob)
			syncAll(alice, bob)
		}
		if st := bob.ForkState(id); st != ports.ForkNotForked {
			t.Errorf("bob's fork state after the super admin's resync: %v, want not forked", st)
		}
		if st := alice.ForkState(id); st != ports.ForkNotForked {
			t.Errorf("alice's fork state after her resync: %v, want not forked", st)
		}
	})
}
