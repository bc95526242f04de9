package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/policy"
	"github.com/regroup-mls/regroup/internal/rogue"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
)

// Gate 10 (ADR-0030 Decision 8, COMP-480 to COMP-482), against regroupd
// processes over gRPC on SQLite and PostgreSQL: a group, a commit and a
// Welcome that state a role policy version the service or the clients do
// not know are refused. regroupd with acceptance refuses the group's
// registration and a super admin's migration commit; behind a regroupd
// without acceptance, which stores both, every member refuses the commit
// and the Welcome. A migration among clients that know the new version
// goes through.
func TestGate10_UnknownPolicyVersion(t *testing.T) {
	for _, mode := range acceptModes {
		t.Run(mode, func(t *testing.T) {
			gate10Service(t, mode)
			gate10Clients(t, mode)
		})
	}
}

// newerBuild makes this process's clients know role policy version 2 as
// a later build would, until the test ends. Only sequential tests may
// call it: the parallel tests of the package start after them.
func newerBuild(t *testing.T) func() {
	old := policy.Versions
	policy.Versions = []uint16{1, 2}
	restore := func() { policy.Versions = old }
	t.Cleanup(restore)
	return restore
}

func gate10Service(t *testing.T, mode string) {
	a := newAcceptance(t, mode)
	alice := a.member("alice", world.Config{})
	bob := a.member("bob", world.Config{})
	carol := a.member("carol", world.Config{})
	id := a.newGroup(alice, bob, carol)
	inboxes := []string{alice.C.InboxID(), bob.C.InboxID(), carol.C.InboxID()}

	// A client refuses to migrate to a version it does not know.
	before := a.highest(ports.TopicGroupMessages, id)
	var unknown *policy.UnknownVersionError
	if err := alice.Conv(id).SetPolicyVersion(a.Ctx, 2); !errors.As(err, &unknown) || unknown.Version != 2 {
		t.Fatalf("a migration to a version the client does not know: %v, want an UnknownVersionError", err)
	}
	if a.highest(ports.TopicGroupMessages, id) != before {
		t.Fatal("the client published a migration to a version it does not know")
	}

	// Commit: a super admin's client that knows version 2 migrates; the
	// service, which does not, refuses and stores nothing.
	restore := newerBuild(t)
	err := alice.Conv(id).SetPolicyVersion(a.Ctx, 2)
	restore()
	if !errors.Is(err, ports.ErrInvalidArgument) || !strings.Contains(err.Error(), policy.ErrUnknownVersion.Error()) {
		t.Fatalf("a migration regroupd does not know: %v, want refused naming the unknown version", err)
	}
	if a.highest(ports.TopicGroupMessages, id) != before {
		t.Fatal("the service stored a migration to a version it does not know")
	}
	world.SyncAll(alice, bob, carol)
	honest(t, id, inboxes, alice, bob, carol)
	a.follows(id, alice, bob, carol)

	// Group: a creator whose client writes version 2 has its group's
	// registration refused; its members are never added, so no Welcome
	// to that group leaves it (the service cannot read a Welcome's group
	// context, which is encrypted to the joiner).
	eve := a.member("eve", world.Config{MLS: rogue.VersionEngine(2, policy.Version)})
	g, err := eve.C.CreateGroup(a.Ctx, client.GroupOptions{Name: "unknown rules", Members: []string{alice.C.InboxID()}})
	if g == nil || !errors.Is(err, ports.ErrInvalidArgument) || !strings.Contains(err.Error(), policy.ErrUnknownVersion.Error()) {
		t.Fatalf("creating a group of version 2: %v, want its registration refused", err)
	}
	if err := g.AddMembers(a.Ctx, alice.C.InboxID()); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("adding a member to the refused group: %v, want refused", err)
	}
	alice.Sync()
	if _, err := alice.C.Conversation(a.Ctx, g.ID()); !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("alice holds the group of an unknown version: %v", err)
	}
	if _, err := a.store.PublicState(a.Ctx, g.ID()); !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("the refused group has a state: %v", err)
	}
}

func gate10Clients(t *testing.T, mode string) {
	w := world.NewWithFlags(t, mode, 4*time.Minute) // regroupd without acceptance: it stores what clients refuse
	alice := w.Member("alice", world.Config{})
	bob := w.Member("bob", world.Config{})
	carol := w.Member("carol", world.Config{})
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "g", Members: []string{bob.C.InboxID(), carol.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	id := g.ID()
	world.SyncAll(alice, bob, carol)
	inboxes := []string{alice.C.InboxID(), bob.C.InboxID(), carol.C.InboxID()}
	honest(t, id, inboxes, alice, bob, carol)

	// Commit: the super admin's migration to version 2, stored unchecked,
	// is refused by every member (its committer's client included).
	epoch := alice.Info(id).Epoch
	if _, err := rogue.Of(alice).SetPolicyVersion(id, 2); err != nil {
		t.Fatalf("the migration reaches the service: %v", err)
	}
	world.SyncAll(alice, bob, carol)
	honest(t, id, inboxes, alice, bob, carol)
	if e := alice.Info(id).Epoch; e != epoch {
		t.Fatalf("members moved to epoch %d with a commit to an unknown policy version, want %d", e, epoch)
	}
	if v := bob.Info(id).PolicyVersion; v != 1 {
		t.Fatalf("bob holds policy version %d, want 1", v)
	}
	if err := bob.Conv(id).UpdateKeys(w.Ctx); err != nil {
		t.Fatalf("the group goes on: %v", err)
	}
	world.SyncAll(alice, bob, carol)
	honest(t, id, inboxes, alice, bob, carol)

	// Welcome: a group created under version 2 sends Welcomes every
	// member refuses for good (COMP-386).
	eve := w.Member("eve", world.Config{MLS: rogue.VersionEngine(2, policy.Version)})
	drain(bob)
	if _, err := eve.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "unknown rules", Members: []string{bob.C.InboxID()}}); err != nil {
		t.Fatalf("eve creates a group of version 2: %v", err)
	}
	bob.Sync()
	rejected := eventually(bob, func(evs []any) bool {
		for _, e := range evs {
			if we, ok := e.(client.WelcomeEvent); ok && we.Rejected && strings.Contains(we.Reason, "COMP-386") {
				return true
			}
		}
		return false
	})
	if !rejected {
		t.Fatal("bob did not reject the Welcome to a group of an unknown policy version")
	}

	// The migration among clients that know the new version: a
	// non-super-admin's client refuses to make it, a super admin's
	// commit is merged by every member, and the floor is raised.
	restore := newerBuild(t)
	defer restore()
	if err := bob.Conv(id).SetPolicyVersion(w.Ctx, 2); !errors.Is(err, client.ErrNotPermitted) {
		t.Fatalf("a member migrates: %v, want ErrNotPermitted", err)
	}
	if err := alice.Conv(id).SetPolicyVersion(w.Ctx, 2); err != nil {
		t.Fatalf("the super admin migrates: %v", err)
	}
	world.SyncAll(alice, bob, carol)
	honest(t, id, inboxes, alice, bob, carol)
	for _, m := range []*world.Member{alice, bob, carol} {
		if info := m.Info(id); info.PolicyVersion != 2 || info.MinProtocolVersion != policy.ViewerProtocolVersion.String() {
			t.Fatalf("%s holds version %d, floor %q after the migration, want 2 and %v", m.Name, info.PolicyVersion,
				info.MinProtocolVersion, policy.ViewerProtocolVersion)
		}
	}
}
