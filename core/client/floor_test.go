package client_test

import (
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/core/policy"
	"github.com/regroup-mls/regroup/internal/rogue"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
)

// lowFloorGroup returns a live group of alice (a super admin, whose
// engine lets the test commit raw changes) and bob whose minimum protocol
// version alice lowered to 1.6.0, as a group created before the viewer
// rules states it.
func lowFloorGroup(t *testing.T, w *world.World, alice, bob *world.Member) []byte {
	t.Helper()
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "g", Members: []string{bob.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	id := g.ID()
	world.SyncAll(alice, bob)
	if _, err := rogue.Of(alice).Commit(id, func(v ports.GroupView) (ports.CommitOptions, error) {
		d, err := metadata.FromExtensions(v.Extensions)
		if err != nil {
			return ports.CommitOptions{}, err
		}
		exts, err := d.Set(metadata.ComponentMinProtocol, []byte("1.6.0")).Apply(v.Extensions)
		return ports.CommitOptions{GroupContextExtensions: exts}, err
	}); err != nil {
		t.Fatal(err)
	}
	world.SyncAll(alice, bob)
	for _, m := range []*world.Member{alice, bob} {
		if got := m.Info(id).MinProtocolVersion; got != "1.6.0" {
			t.Fatalf("%s: floor %q after lowering it, want 1.6.0", m.Name, got)
		}
	}
	return id
}

// TestCOMP390_ViewerRaisesFloorInSameCommit: in a live group whose
// minimum protocol version is below the viewer rules' version, the super
// admin's commit that makes a member a viewer also raises the floor to
// policy.ViewerProtocolVersion — one commit, one epoch, applied by every
// member — and an admin, who may not change the floor, is refused before
// anything is published.
func TestCOMP390_ViewerRaisesFloorInSameCommit(t *testing.T) {
	world.Each(t, []string{"embedded"}, func(t *testing.T, w *world.World) {
		alice := w.Member("alice", world.Config{MLS: rogue.Engine})
		bob, carl := w.Member("bob", world.Config{}), w.Member("carl", world.Config{})
		id := lowFloorGroup(t, w, alice, bob)
		before := alice.Info(id)
		if err := alice.Conv(id).SetRole(w.Ctx, bob.C.InboxID(), client.RoleViewer); err != nil {
			t.Fatal(err)
		}
		world.SyncAll(alice, bob)
		world.Agree(t, id, alice, bob)
		for _, m := range []*world.Member{alice, bob} {
			info := m.Info(id)
			if info.Epoch != before.Epoch+1 || len(info.Viewers) != 1 {
				t.Fatalf("%s: epoch %d viewers %v, want epoch %d and bob a viewer", m.Name, info.Epoch, info.Viewers, before.Epoch+1)
			}
			if info.MinProtocolVersion != policy.ViewerProtocolVersion.String() {
				t.Fatalf("%s: floor %q in the commit that gave the group viewers, want %v",
					m.Name, info.MinProtocolVersion, policy.ViewerProtocolVersion)
			}
		}

		// An admin may add viewers but not raise the floor: in a group
		// whose floor is low, its client refuses instead of publishing a
		// commit older members would accept.
		id = lowFloorGroup(t, w, alice, bob)
		if err := alice.Conv(id).SetAdmins(w.Ctx, bob.C.InboxID()); err != nil {
			t.Fatal(err)
		}
		bob.Sync()
		err := bob.Conv(id).AddViewers(w.Ctx, carl.C.InboxID())
		if !errors.Is(err, client.ErrNotPermitted) {
			t.Fatalf("admin's AddViewers under a low floor: %v, want ErrNotPermitted", err)
		}
		world.SyncAll(alice, bob)
		if v := alice.Info(id).Viewers; len(v) != 0 {
			t.Fatalf("viewers %v after a refused add", v)
		}
	})
}

// TestCOMP390_OlderClientHoldsViewerGroup: a client claiming a protocol
// version before the viewer rules is treated as the minimum-version rules
// say: a Welcome to a group that has viewers is held, not joined
// (JOIN-057), because the commit that gave the group viewers raised its
// floor.
func TestCOMP390_OlderClientHoldsViewerGroup(t *testing.T) {
	world.Each(t, []string{"embedded"}, func(t *testing.T, w *world.World) {
		alice := w.Member("alice", world.Config{MLS: rogue.Engine})
		bob := w.Member("bob", world.Config{})
		cur := client.ProtocolVersion
		client.ProtocolVersion = metadata.Version{Major: 1, Minor: 6, Patch: 0}
		old := w.Member("old", world.Config{})
		client.ProtocolVersion = cur

		id := lowFloorGroup(t, w, alice, bob)
		if err := alice.Conv(id).SetRole(w.Ctx, bob.C.InboxID(), client.RoleViewer); err != nil {
			t.Fatal(err)
		}
		if err := alice.Conv(id).AddMembers(w.Ctx, old.C.InboxID()); err != nil {
			t.Fatal(err)
		}
		world.SyncAll(alice, bob, old)
		if _, err := old.C.Conversation(w.Ctx, id); !errors.Is(err, ports.ErrNotFound) {
			t.Fatalf("a 1.6.0 client joined a group with viewers: %v", err)
		}
		var held []ports.HeldWelcome
		old.Tx(func(tx ports.Tx) error {
			var err error
			held, err = tx.HeldWelcomes().List(w.Ctx)
			return err
		})
		if len(held) != 1 {
			t.Fatalf("a 1.6.0 client holds %d Welcomes, want the group's one (JOIN-057)", len(held))
		}
	})
}
