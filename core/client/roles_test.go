package client_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/core/policy"
	"github.com/regroup-mls/regroup/internal/rogue"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
)

// refusedByAll fails the test unless every honest member recorded the
// commit at seq as invalid and holds the state it held before.
func refusedByAll(t *testing.T, what string, id []byte, seq uint64, before client.Info, honest ...*world.Member) {
	t.Helper()
	world.Agree(t, id, honest...)
	for _, m := range honest {
		after := m.Info(id)
		if after.Epoch != before.Epoch || after.Name != before.Name || after.PolicyVersion != before.PolicyVersion ||
			!slices.Equal(after.SuperAdmins, before.SuperAdmins) || !slices.Equal(after.Viewers, before.Viewers) {
			t.Fatalf("%s took effect at %s: %+v", what, m.Name, after)
		}
		if res := resultOf(t, m, id, seq); res != ports.CommitResultInvalid {
			t.Fatalf("%s: %s recorded %v for commit %d, want invalid", what, m.Name, res, seq)
		}
	}
}

// TestCOMP389_ViewerCommitBeyondOwnLeafRefused: in a live group, a viewer whose patched client publishes what a
// viewer may not commit — a rename, an outsider's add, another member's
// removal, its own removal from the viewer list — is refused by every
// honest member, which record the commit invalid and stay together; an
// honest viewer's key update (a path-only commit) is applied by everyone,
// and the group goes on.
func TestCOMP389_ViewerCommitBeyondOwnLeafRefused(t *testing.T) {
	world.Each(t, []string{"embedded"}, testViewerCommits)
}

func testViewerCommits(t *testing.T, w *world.World) {
	alice, bob := w.Member("alice", world.Config{}), w.Member("bob", world.Config{})
	viv, outsider := w.Member("viv", world.Config{}), w.Member("outsider", world.Config{})
	honest := []*world.Member{alice, bob, viv}
	acts := []struct {
		name string
		do   func(r rogue.Member, id []byte) (uint64, error)
	}{
		{"a viewer's rename", func(r rogue.Member, id []byte) (uint64, error) { return r.Rename(id, "mallory's") }},
		{"a viewer's add of an outsider", func(r rogue.Member, id []byte) (uint64, error) {
			return r.Add(id, outsider.C.InstallationKey())
		}},
		{"a viewer's removal of a member", func(r rogue.Member, id []byte) (uint64, error) { return r.Remove(id, bob.C.InboxID()) }},
		{"a viewer's own promotion", func(r rogue.Member, id []byte) (uint64, error) { return r.SetViewers(id, viv.C.InboxID()) }},
		// A plain member may refresh its own GROUP_MEMBERSHIP entry
		// (COMP-247); a viewer changes no metadata at all.
		{"a viewer's refresh of its own entry", func(r rogue.Member, id []byte) (uint64, error) {
			return r.RewriteMembership(id, r.C.InboxID(), entrySeq(t, alice, id, r.C.InboxID())+1)
		}},
	}
	// One rogue viewer per act: a rogue that merged its own forbidden
	// commit is forked, and what it commits next no honest member can
	// even process.
	rogues := make([]*world.Member, len(acts))
	viewers := []string{viv.C.InboxID()}
	for i := range acts {
		rogues[i] = w.Member(fmt.Sprintf("mallory%d", i), world.Config{MLS: rogue.Engine})
		viewers = append(viewers, rogues[i].C.InboxID())
	}
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "g", Members: []string{bob.C.InboxID()}, Viewers: viewers})
	if err != nil {
		t.Fatal(err)
	}
	id := g.ID()
	world.SyncAll(append(slices.Clone(honest), rogues...)...)
	if got := alice.Info(id).Viewers; len(got) != len(viewers) {
		t.Fatalf("viewers %v", got)
	}
	if role, err := bob.Conv(id).Role(w.Ctx, rogues[0].C.InboxID()); err != nil || role != client.RoleViewer {
		t.Fatalf("a rogue's role at bob: %v, %v", role, err)
	}
	for i, act := range acts {
		before := alice.Info(id)
		seq, err := act.do(rogue.Of(rogues[i]), id)
		if err != nil {
			t.Fatalf("%s: %v", act.name, err)
		}
		world.SyncAll(append(slices.Clone(honest), rogues[i])...)
		refusedByAll(t, act.name, id, seq, before, honest...)
	}
	// An honest viewer updates its own leaf: every member applies it.
	before := alice.Info(id)
	if err := viv.Conv(id).UpdateKeys(w.Ctx); err != nil {
		t.Fatalf("viv's key update: %v", err)
	}
	world.SyncAll(honest...)
	world.Agree(t, id, honest...)
	if got := alice.Info(id).Epoch; got != before.Epoch+1 {
		t.Fatalf("epoch %d after viv's key update, want %d", got, before.Epoch+1)
	}
	// A viewer's client refuses its changes before it commits them.
	if err := viv.Conv(id).SetName(w.Ctx, "viv's"); !errors.Is(err, client.ErrNotPermitted) {
		t.Fatalf("viv renames: %v, want ErrNotPermitted", err)
	}
	if err := g.SetName(w.Ctx, "goes on"); err != nil {
		t.Fatal(err)
	}
	world.SyncAll(honest...)
	world.Agree(t, id, honest...)
}

// TestCOMP388_ViewerMessagesDiscarded: a viewer's client refuses to send
// (ErrViewer); a message the viewer's patched client publishes anyway is
// discarded by every receiver, which judge the sender's leaf, while its
// leave request and the members' messages are kept. Once a super admin
// makes the viewer a member, its messages are read.
func TestCOMP388_ViewerMessagesDiscarded(t *testing.T) {
	world.Each(t, []string{"embedded"}, testViewerMessages)
}

func testViewerMessages(t *testing.T, w *world.World) {
	alice, bob := w.Member("alice", world.Config{}), w.Member("bob", world.Config{})
	viv := w.Member("viv", world.Config{MLS: rogue.Engine})
	all := []*world.Member{alice, bob, viv}
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "g", Members: []string{bob.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	id := g.ID()
	if err := g.AddViewers(w.Ctx, viv.C.InboxID()); err != nil {
		t.Fatal(err)
	}
	world.SyncAll(all...)
	if _, err := viv.Conv(id).Send(w.Ctx, []byte("from a viewer")); !errors.Is(err, client.ErrViewer) {
		t.Fatalf("viv sends: %v, want ErrViewer", err)
	}
	r := rogue.Of(viv)
	if _, err := r.Send(id, ports.MessageApplication, []byte("forged by a viewer")); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Conv(id).Send(w.Ctx, []byte("from bob")); err != nil {
		t.Fatal(err)
	}
	world.SyncAll(all...)
	for _, m := range []*world.Member{alice, bob} {
		if got := texts(t, m, id); slices.Contains(got, "forged by a viewer") || !slices.Contains(got, "from bob") {
			t.Fatalf("%s reads %q", m.Name, got)
		}
	}
	if err := g.SetRole(w.Ctx, viv.C.InboxID(), client.RoleMember); err != nil {
		t.Fatal(err)
	}
	world.SyncAll(all...)
	if _, err := viv.Conv(id).Send(w.Ctx, []byte("from viv, a member")); err != nil {
		t.Fatalf("viv, a member now, sends: %v", err)
	}
	world.SyncAll(all...)
	for _, m := range []*world.Member{alice, bob} {
		if got := texts(t, m, id); !slices.Contains(got, "from viv, a member") {
			t.Fatalf("%s reads %q", m.Name, got)
		}
	}
	// A viewer's leave request (empty, COMP-475) is kept by every member.
	if err := g.SetRole(w.Ctx, viv.C.InboxID(), client.RoleViewer); err != nil {
		t.Fatal(err)
	}
	world.SyncAll(all...)
	if _, err := r.Send(id, ports.MessageLeaveRequest, nil); err != nil {
		t.Fatal(err)
	}
	world.SyncAll(alice, bob)
	for _, m := range []*world.Member{alice, bob} {
		if !hasKind(t, m, id, ports.MessageLeaveRequest) {
			t.Fatalf("%s dropped the viewer's leave request", m.Name)
		}
	}
}

// entrySeq returns the identity sequence id of inbox's GROUP_MEMBERSHIP
// entry as m holds it.
func entrySeq(t *testing.T, m *world.Member, id []byte, inbox string) uint64 {
	t.Helper()
	d, err := metadata.FromExtensions(viewOf(t, m, id).Extensions)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := d.Membership()
	if err != nil {
		t.Fatal(err)
	}
	return mem[inbox].GetSequenceId()
}

func hasKind(t *testing.T, m *world.Member, id []byte, kind ports.MessageKind) bool {
	t.Helper()
	msgs, err := m.Conv(id).Messages(m.W.Ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(msgs, func(msg ports.Message) bool { return msg.Kind == kind })
}

// TestCOMP385_VersionAndRolesAreSuperAdmins: a group a client creates
// states the role policy version it knows; in a live group, an admin
// whose patched client drops the role policy version component (a change
// of the version), makes a member a viewer or makes a viewer a member is
// refused by every honest member; a plain member's client refuses
// SetRole; the super admin's SetRole applies everywhere.
func TestCOMP385_VersionAndRolesAreSuperAdmins(t *testing.T) {
	world.Each(t, []string{"embedded"}, testVersionAndRoles)
}

func testVersionAndRoles(t *testing.T, w *world.World) {
	alice, bob, viv := w.Member("alice", world.Config{}), w.Member("bob", world.Config{}), w.Member("viv", world.Config{})
	honest := []*world.Member{alice, bob, viv}
	acts := []struct {
		name string
		do   func(r rogue.Member, id []byte) (uint64, error)
	}{
		{"an admin drops the policy version", func(r rogue.Member, id []byte) (uint64, error) { return r.SetPolicyVersion(id, 0) }},
		{"an admin makes a member a viewer", func(r rogue.Member, id []byte) (uint64, error) {
			return r.SetViewers(id, viv.C.InboxID(), bob.C.InboxID())
		}},
		{"an admin makes a viewer a member", func(r rogue.Member, id []byte) (uint64, error) { return r.SetViewers(id) }},
	}
	rogues := make([]*world.Member, len(acts)) // one per act, as above
	members := []string{bob.C.InboxID()}
	var admins []string
	for i := range acts {
		rogues[i] = w.Member(fmt.Sprintf("adam%d", i), world.Config{MLS: rogue.Engine})
		members, admins = append(members, rogues[i].C.InboxID()), append(admins, rogues[i].C.InboxID())
	}
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "g", Members: members, Admins: admins, Viewers: []string{viv.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	id := g.ID()
	world.SyncAll(append(slices.Clone(honest), rogues...)...)
	// The group states the version itself (COMP-385): absent would read
	// as 1 too (COMP-386).
	d, err := metadata.FromExtensions(viewOf(t, bob, id).Extensions)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok, err := d.PolicyVersion(); !ok || err != nil || v != policy.Version || bob.Info(id).PolicyVersion != v {
		t.Fatalf("the group states version %d (present %v, %v), want %d", v, ok, err, policy.Version)
	}
	for i, act := range acts {
		before := alice.Info(id)
		seq, err := act.do(rogue.Of(rogues[i]), id)
		if err != nil {
			t.Fatalf("%s: %v", act.name, err)
		}
		world.SyncAll(append(slices.Clone(honest), rogues[i])...)
		refusedByAll(t, act.name, id, seq, before, honest...)
	}
	if err := bob.Conv(id).SetRole(w.Ctx, viv.C.InboxID(), client.RoleMember); !errors.Is(err, client.ErrNotPermitted) {
		t.Fatalf("bob sets a role: %v, want ErrNotPermitted", err)
	}
	if err := g.SetRole(w.Ctx, bob.C.InboxID(), client.RoleViewer); err != nil {
		t.Fatal(err)
	}
	if err := g.SetRole(w.Ctx, viv.C.InboxID(), client.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	world.SyncAll(honest...)
	world.Agree(t, id, honest...)
	for _, m := range honest {
		info := m.Info(id)
		if !slices.Equal(info.Viewers, []string{bob.C.InboxID()}) || !slices.Contains(info.Admins, viv.C.InboxID()) {
			t.Fatalf("%s after the role changes: viewers %v, admins %v", m.Name, info.Viewers, info.Admins)
		}
	}
}

// TestCOMP386_UnknownPolicyVersionRefused: a super admin's patched client
// moves a live group to role policy version 7, which no member knows:
// every honest member refuses the commit. A creator whose group states
// version 7 from the start sends a Welcome that its recipient rejects for
// good, recorded under COMP-386 with the version named, and never joins.
func TestCOMP386_UnknownPolicyVersionRefused(t *testing.T) {
	world.Each(t, []string{"embedded"}, testUnknownPolicyVersion)
}

func testUnknownPolicyVersion(t *testing.T, w *world.World) {
	alice, bob, carol := w.Member("alice", world.Config{}), w.Member("bob", world.Config{}), w.Member("carol", world.Config{})
	sam := w.Member("sam", world.Config{MLS: rogue.Engine})
	honest := []*world.Member{alice, bob}
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "g", Members: []string{bob.C.InboxID(), sam.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	id := g.ID()
	world.SyncAll(alice, bob, sam)
	if err := g.SetSuperAdmins(w.Ctx, alice.C.InboxID(), sam.C.InboxID()); err != nil {
		t.Fatal(err)
	}
	world.SyncAll(alice, bob, sam)
	before := alice.Info(id)
	seq, err := rogue.Of(sam).SetPolicyVersion(id, 7)
	if err != nil {
		t.Fatal(err)
	}
	world.SyncAll(alice, bob, sam)
	refusedByAll(t, "a move to version 7", id, seq, before, honest...)

	// A group stating version 7 from its creation: its Welcome is
	// rejected.
	zed := w.Member("zed", world.Config{MLS: rogue.VersionEngine(7, policy.Version)})
	zg, err := zed.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "v7", Members: []string{carol.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	world.SyncAll(zed, carol)
	if _, err := carol.C.Conversation(w.Ctx, zg.ID()); !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("carol holds the version-7 group: %v", err)
	}
	rej, err := carol.C.RejectedWelcomes(w.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rej) != 1 || rej[0].Rule != "COMP-386" || !strings.Contains(rej[0].Reason, "version 7") {
		t.Fatalf("carol's rejected Welcomes: %+v", rej)
	}
}

// TestCOMP386_GroupWithoutVersionIsVersion1: a group whose context states
// no role policy version — as every group created before the component
// existed — is joined and run under version 1: its creator's commits,
// which keep it without the component, apply at every member, and a
// member's messages are read.
func TestCOMP386_GroupWithoutVersionIsVersion1(t *testing.T) {
	world.Each(t, []string{"embedded"}, testGroupWithoutVersion)
}

func testGroupWithoutVersion(t *testing.T, w *world.World) {
	old := w.Member("old", world.Config{MLS: rogue.VersionEngine(0, policy.Version)})
	bob, carol := w.Member("bob", world.Config{}), w.Member("carol", world.Config{})
	g, err := old.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "from before", Members: []string{bob.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	id := g.ID()
	world.SyncAll(old, bob)
	if err := g.AddMembers(w.Ctx, carol.C.InboxID()); err != nil {
		t.Fatal(err)
	}
	if err := g.SetName(w.Ctx, "still from before"); err != nil {
		t.Fatal(err)
	}
	world.SyncAll(old, bob, carol)
	if _, err := bob.Conv(id).Send(w.Ctx, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	world.SyncAll(old, bob, carol)
	world.Agree(t, id, old, bob, carol)
	for _, m := range []*world.Member{bob, carol} {
		d, err := metadata.FromExtensions(viewOf(t, m, id).Extensions)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := d.Get(metadata.ComponentPolicyVersion); ok {
			t.Fatalf("%s's group states a policy version", m.Name)
		}
		if info := m.Info(id); info.PolicyVersion != 1 || info.Name != "still from before" {
			t.Fatalf("%s: version %d, name %q", m.Name, info.PolicyVersion, info.Name)
		}
	}
	if got := texts(t, carol, id); !slices.Contains(got, "hello") {
		t.Fatalf("carol reads %q", got)
	}
}
