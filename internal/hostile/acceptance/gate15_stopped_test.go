package acceptance_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/internal/testenv"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// Gate 15 (amendment rule 4; COMP-494, COMP-520, COMP-521): after a
// restore done as docs/operations.md says, two super admins' devices
// upload conflicting chains. Alice and bob are super admins; after the
// backup alice renames the group and carol merges it; after the restore
// bob, who had not read it, renames it too (taken: a super admin's
// upload) and dave merges his. Alice's client uploads her chain: neither
// is kept over the other, the group stops, a STOPPED notice goes on its
// topic, and every member's client reports it, the super admins' as
// owners. Bob moves the group to a new one: the stopped group takes his
// pointer and nothing else, and every member, on either branch, ends in
// the successor at the same epoch, authenticator and members.
func TestGate15_ConflictingOwnerChainsStopTheGroup(t *testing.T) {
	eachDB(t, func(t *testing.T, mode string) {
		g := newGate(t, mode, "-catch-up-window", "2m")
		kit := testenv.NewBackupKit(t, mode, g.Regroupd)
		alice, bob, carol, dave := g.Member("alice", world.Config{}), g.Member("bob", world.Config{}),
			g.Member("carol", world.Config{}), g.Member("dave", world.Config{})
		all := []*world.Member{alice, bob, carol, dave}
		id := g.group(alice, []*world.Member{bob, carol, dave}, nil)
		if err := alice.Conv(id).SetSuperAdmins(g.Ctx, alice.C.InboxID(), bob.C.InboxID()); err != nil {
			t.Fatal(err)
		}
		world.SyncAll(all...)
		kit.Backup()
		restored := epoch(alice, id)
		if err := alice.Conv(id).SetName(g.Ctx, "alice's"); err != nil {
			t.Fatal(err)
		}
		world.Round(alice, carol) // bob and dave do not read it
		events := map[*world.Member]<-chan client.Event{}
		for _, m := range all {
			events[m] = m.C.Events()
		}
		kit.PutBack(true)

		world.WaitServing(t, bob)
		if err := bob.Conv(id).SetName(g.Ctx, "bob's"); err != nil {
			t.Fatalf("bob's commit for the restored epoch %d: %v", restored, err)
		}
		world.WaitServing(t, dave)
		world.Agree(t, id, bob, dave)
		// Alice's commit is refused for catch-up; her client uploads her
		// chain: a second super admin's commit for the restored epoch.
		world.WaitServing(t, alice)
		if err := alice.Conv(id).UpdateKeys(g.Ctx); !errors.Is(err, ports.ErrCatchUp) {
			t.Fatalf("alice's commit after the restore: %v; want ErrCatchUp", err)
		}
		if n := g.notice(bob, id, 0, backendpb.AcceptanceNotice_STOPPED); n.GetEpoch() != restored {
			t.Fatalf("STOPPED notice for epoch %d; want the restored epoch %d", n.GetEpoch(), restored)
		}
		world.WaitServing(t, carol)
		world.SyncAll(all...)
		for _, m := range all {
			ev := stoppedEvent(t, m, events[m], id)
			if owner := m == alice || m == bob; ev.Epoch != restored || ev.SuperAdmin != owner {
				t.Errorf("%s's stopped event %+v; want epoch %d, super admin %v", m.Name, ev, restored, owner)
			}
		}
		for _, m := range []*world.Member{alice, bob} {
			if err := m.Conv(id).UpdateKeys(g.Ctx); !errors.Is(err, ports.ErrCatchUp) {
				t.Errorf("%s commits in the stopped group: %v; want ErrCatchUp", m.Name, err)
			}
		}

		// Alice's pointer is of the other chain: not taken.
		if err := alice.Conv(id).SetSuccessor(g.Ctx, bytes.Repeat([]byte{0xa1}, 16)); !errors.Is(err, ports.ErrCatchUp) {
			t.Errorf("alice's pointer on the chain the service does not hold: %v; want ErrCatchUp", err)
		}
		// Bob, whose chain the service holds, moves the group.
		next, err := bob.Conv(id).MoveToNewGroup(g.Ctx, client.GroupOptions{Name: "moved",
			Members: []string{alice.C.InboxID(), carol.C.InboxID(), dave.C.InboxID()}})
		if err != nil {
			t.Fatalf("bob's move of the stopped group: %v", err)
		}
		world.SyncAll(all...)
		for _, m := range []*world.Member{bob, dave} {
			if s, err := m.Conv(id).Successor(g.Ctx); err != nil || !bytes.Equal(s, next.ID()) {
				t.Errorf("%s reads the successor %x, %v; want %x", m.Name, s, err, next.ID())
			}
		}
		if _, err := carol.Conv(id).Resync(g.Ctx); !errors.Is(err, ports.ErrCatchUp) {
			t.Errorf("carol's resync of the stopped group: %v; want ErrCatchUp", err)
		}
		g.honest(next.ID(), nil, all...)
		if _, err := carol.Conv(next.ID()).Send(g.Ctx, []byte("moved on")); err != nil {
			t.Fatal(err)
		}
		world.SyncAll(all...)
		for _, m := range all {
			read(t, m, next.ID(), "moved on")
		}
	})
}

// stoppedEvent waits for m's CatchUpStoppedEvent about the group.
func stoppedEvent(t *testing.T, m *world.Member, events <-chan client.Event, id []byte) client.CatchUpStoppedEvent {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev := <-events:
			if s, ok := ev.(client.CatchUpStoppedEvent); ok && bytes.Equal(s.GroupID, id) {
				return s
			}
		case <-timeout:
			t.Fatalf("%s: no stopped event about the group", m.Name)
		}
	}
}
