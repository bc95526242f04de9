package client_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/internal/rogue"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
)

// TestCOMP244_RogueMembersCannotBorrowAuthority runs each forbidden act a
// member can commit directly — the rogue's engine builds it and publishes
// it, and its client, patched not to judge its own commits, merges it — in
// a live group over a
// regroupd process: a plain member removes another, renames the group,
// makes itself super admin, adds an outsider, rewrites another inbox's
// GROUP_MEMBERSHIP entry to 1 and to 2^40 (COMP-247); a super admin adds
// a leaf under another member's inbox with a key that inbox never
// associated (GMOD-012, COMP-238), empties the super admin list or lists
// a non-member (COMP-248). After
// each, every honest member holds the same epoch authenticator and
// membership, the change has not taken effect, every honest member
// recorded the commit as invalid (FORK-002, GMOD-021), and the rogue,
// which merged its own commit, reads forked (or unknown, when its own
// state lists no publisher). Then the honest members go on committing and
// sending.
func TestCOMP244_RogueMembersCannotBorrowAuthority(t *testing.T) {
	world.Each(t, world.Networked, testRogueMembers)
}

func testRogueMembers(t *testing.T, w *world.World) {
	alice, bob, carol := w.Member("alice", world.Config{}), w.Member("bob", world.Config{}), w.Member("carol", world.Config{})
	outsider := w.Member("outsider", world.Config{})
	honest := []*world.Member{alice, bob, carol}
	type act struct {
		name  string
		super bool
		do    func(r rogue.Member, id []byte) (uint64, error)
	}
	acts := []act{
		{"removes another member", false, func(r rogue.Member, id []byte) (uint64, error) { return r.Remove(id, bob.C.InboxID()) }},
		{"renames the group", false, func(r rogue.Member, id []byte) (uint64, error) { return r.Rename(id, "taken") }},
		{"makes itself super admin", false, func(r rogue.Member, id []byte) (uint64, error) {
			return r.SetSuperAdmins(id, alice.C.InboxID(), r.C.InboxID())
		}},
		{"adds an outsider", false, func(r rogue.Member, id []byte) (uint64, error) { return r.Add(id, outsider.C.InstallationKey()) }},
		{"rewrites an entry to 1", false, func(r rogue.Member, id []byte) (uint64, error) {
			return r.RewriteMembership(id, carol.C.InboxID(), 1)
		}},
		{"rewrites an entry to 2^40", false, func(r rogue.Member, id []byte) (uint64, error) {
			return r.RewriteMembership(id, carol.C.InboxID(), 1<<40)
		}},
		{"adds a device under another member's inbox", true, func(r rogue.Member, id []byte) (uint64, error) {
			return r.AddUnder(id, carol.C.InboxID())
		}},
		{"empties the super admin list", true, func(r rogue.Member, id []byte) (uint64, error) { return r.SetSuperAdmins(id) }},
		{"lists a non-member as super admin", true, func(r rogue.Member, id []byte) (uint64, error) {
			return r.SetSuperAdmins(id, alice.C.InboxID(), r.C.InboxID(), outsider.C.InboxID())
		}},
	}
	rogues := make([]*world.Member, len(acts))
	inboxes := []string{bob.C.InboxID(), carol.C.InboxID()}
	for i := range acts {
		rogues[i] = w.Member(fmt.Sprintf("rogue%d", i), world.Config{MLS: rogue.Engine})
		inboxes = append(inboxes, rogues[i].C.InboxID())
	}
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "g", Members: inboxes})
	if err != nil {
		t.Fatal(err)
	}
	id := g.ID()
	everyone := append(slices.Clone(honest), rogues...)
	world.SyncAll(everyone...)
	supers := []string{alice.C.InboxID()}
	for i, a := range acts {
		if a.super {
			supers = append(supers, rogues[i].C.InboxID())
		}
	}
	if err := g.SetSuperAdmins(w.Ctx, supers...); err != nil {
		t.Fatal(err)
	}
	world.SyncAll(everyone...)
	for _, m := range everyone {
		if err := m.Conv(id).SetConsent(w.Ctx, ports.ConsentAllowed); err != nil {
			t.Fatal(err)
		}
	}
	world.Agree(t, id, everyone...)

	for i, a := range acts {
		r := rogue.Of(rogues[i])
		before := alice.Info(id)
		view := viewOf(t, alice, id)
		seq, err := a.do(r, id)
		if err != nil {
			t.Fatalf("rogue %s: %v", a.name, err)
		}
		world.SyncAll(append(slices.Clone(honest), rogues[i])...)
		world.Agree(t, id, honest...)
		for _, m := range honest {
			after := m.Info(id)
			if after.Epoch != before.Epoch || after.Name != before.Name || !slices.Equal(after.SuperAdmins, before.SuperAdmins) {
				t.Fatalf("%s: the rogue %s took effect at %s: %+v", a.name, a.name, m.Name, after)
			}
			if !rogue.SameMembers(view, viewOf(t, m, id)) {
				t.Fatalf("%s: %s's membership changed", a.name, m.Name)
			}
			if res := resultOf(t, m, id, seq); res != ports.CommitResultInvalid {
				t.Fatalf("%s: %s recorded %v for the rogue's commit %d, want invalid", a.name, m.Name, res, seq)
			}
		}
		// The rogue merged its own commit: it reads forked, or unknown when
		// its own state names no publisher left to compare with.
		if st := rogues[i].ForkState(id); st != ports.ForkForked && !(a.super && st == ports.ForkUnknown) {
			t.Fatalf("%s: the rogue, which merged its own commit, reads %v, want forked", a.name, st)
		}
	}
	// The honest members go on.
	if err := g.SetName(w.Ctx, "still alice's"); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Conv(id).Send(w.Ctx, []byte("still here")); err != nil {
		t.Fatal(err)
	}
	world.SyncAll(honest...)
	world.Agree(t, id, honest...)
	for _, m := range honest {
		if got := texts(t, m, id); !slices.Contains(got, "still here") || m.Info(id).Name != "still alice's" {
			t.Fatalf("%s after the rogues: %q, name %q", m.Name, got, m.Info(id).Name)
		}
		if st := m.ForkState(id); st == ports.ForkForked {
			t.Fatalf("%s reads forked", m.Name)
		}
	}
}

func viewOf(t *testing.T, m *world.Member, id []byte) ports.GroupView {
	t.Helper()
	var v ports.GroupView
	m.Tx(func(tx ports.Tx) error {
		var err error
		v, err = m.Engine.Group(m.W.Ctx, tx, id)
		return err
	})
	return v
}

func resultOf(t *testing.T, m *world.Member, id []byte, seq uint64) ports.CommitResult {
	t.Helper()
	for _, e := range localEntries(t, m, id) {
		if e.CommitSequenceID == seq {
			return e.CommitResult
		}
	}
	return 0
}

// TestCOMP245_ProposalsCannotRideOnHonestCommits: a plain member publishes
// standalone proposals — removing another member, renaming the group,
// making itself super admin, adding an outsider — and then the super admin
// commits ordinary changes (a key update, a rename of her own). Her
// commits carry none of the proposals (COMP-245), so they apply at every
// member, none of the proposed changes takes effect, and her rename is
// not stopped by the member's ("more than one GroupContextExtensions").
// A commit that did carry them is refused by the proposer's role
// (COMP-244, TestCOMP244_ProposalsByReferenceJudgedByProposer).
func TestCOMP245_ProposalsCannotRideOnHonestCommits(t *testing.T) {
	world.Each(t, world.Networked, testProposalsDoNotRide)
}

func testProposalsDoNotRide(t *testing.T, w *world.World) {
	alice, bob, carol := w.Member("alice", world.Config{}), w.Member("bob", world.Config{}), w.Member("carol", world.Config{})
	mallory, outsider := w.Member("mallory", world.Config{MLS: rogue.Engine}), w.Member("outsider", world.Config{})
	all := []*world.Member{alice, bob, carol, mallory}
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "g",
		Members: []string{bob.C.InboxID(), carol.C.InboxID(), mallory.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	id := g.ID()
	world.SyncAll(all...)
	r := rogue.Of(mallory)
	proposals := []struct {
		name string
		send func() (uint64, error)
	}{
		{"remove bob", func() (uint64, error) { return r.ProposeRemove(id, bob.C.InboxID()) }},
		{"rename", func() (uint64, error) {
			return r.ProposeMetadata(id, func(d metadata.Dictionary) metadata.Dictionary {
				return d.Set(metadata.ComponentName, []byte("mallory's"))
			})
		}},
		{"promote mallory", func() (uint64, error) {
			return r.ProposeMetadata(id, func(d metadata.Dictionary) metadata.Dictionary {
				return d.Set(metadata.ComponentSuperAdminList, metadata.EncodeInboxList([]string{alice.C.InboxID(), mallory.C.InboxID()}))
			})
		}},
		{"add an outsider", func() (uint64, error) { return r.ProposeAdd(id, outsider.C.InstallationKey()) }},
	}
	for _, p := range proposals {
		t.Run(p.name, func(t *testing.T) {
			before := viewOf(t, alice, id)
			if _, err := p.send(); err != nil {
				t.Fatal(err)
			}
			world.SyncAll(all...)
			if err := g.UpdateKeys(w.Ctx); err != nil {
				t.Fatalf("alice's key update after mallory's proposal: %v", err)
			}
			if err := g.SetName(w.Ctx, "alice's "+p.name); err != nil {
				t.Fatalf("alice's rename after mallory's proposal: %v", err)
			}
			world.SyncAll(all...)
			world.Agree(t, id, all...)
			for _, m := range all {
				info := m.Info(id)
				if info.Epoch != before.Epoch+2 || info.Name != "alice's "+p.name || len(info.SuperAdmins) != 1 {
					t.Fatalf("%s after alice's commits: epoch %d (want %d), name %q, super admins %v", m.Name, info.Epoch, before.Epoch+2, info.Name, info.SuperAdmins)
				}
				if !rogue.SameMembers(before, viewOf(t, m, id)) {
					t.Fatalf("%s: mallory's proposal changed the membership", m.Name)
				}
			}
		})
	}
}

// TestCOMP244_ExternalCommitsRefused: inside an external commit a member
// tries what it may not commit: a leaf of an outsider's inbox joined by
// itself, which every member refuses (COMP-396) and records invalid while
// the group goes on. A resync of its own leaf is one of the two external
// commits members accept (COMP-396) and is applied. (A resync whose leaf
// names another inbox the engine refuses to build; COMP-246 refuses it at
// every receiver.)
func TestCOMP244_ExternalCommitsRefused(t *testing.T) {
	world.Each(t, world.Networked, testExternalCommitsRefused)
}

func testExternalCommitsRefused(t *testing.T, w *world.World) {
	alice, bob, outsider := w.Member("alice", world.Config{}), w.Member("bob", world.Config{}), w.Member("outsider", world.Config{})
	mallory := w.Member("mallory", world.Config{MLS: rogue.Engine})
	all := []*world.Member{alice, bob, mallory}
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "g", Members: []string{bob.C.InboxID(), mallory.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	id := g.ID()
	world.SyncAll(all...)
	r := rogue.Of(mallory)
	var seqs []uint64
	var resynced uint64
	for _, act := range []struct {
		name   string
		inbox  string
		resync bool
	}{{"a resync of its own leaf", mallory.C.InboxID(), true}, {"a join as an outsider", outsider.C.InboxID(), false}} {
		before := viewOf(t, alice, id)
		seq, err := r.ExternalCommit(id, act.inbox, act.resync)
		if err != nil {
			t.Fatalf("%s: %v", act.name, err)
		}
		world.SyncAll(all...)
		world.Agree(t, id, alice, bob)
		for _, m := range []*world.Member{alice, bob} {
			if !rogue.SameMembers(before, viewOf(t, m, id)) {
				t.Fatalf("%s took effect at %s", act.name, m.Name)
			}
		}
		if act.resync {
			resynced = seq
			continue
		}
		seqs = append(seqs, seq)
	}
	if err := g.SetName(w.Ctx, "goes on"); err != nil {
		t.Fatal(err)
	}
	world.SyncAll(alice, bob)
	world.Agree(t, id, alice, bob)
	// Each refusal is recorded, at the latest once an envelope the member
	// authenticated follows it (COMP-240): one the engine refused to
	// process as undecryptable or invalid, one the policy refused as
	// invalid.
	for _, m := range []*world.Member{alice, bob} {
		for _, seq := range seqs {
			if res := resultOf(t, m, id, seq); res == 0 || res == ports.CommitResultApplied {
				t.Fatalf("%s recorded %v for the external commit %d, want a refusal", m.Name, res, seq)
			}
		}
		if res := resultOf(t, m, id, resynced); res != ports.CommitResultApplied {
			t.Fatalf("%s recorded %v for mallory's resync %d, want it applied", m.Name, res, resynced)
		}
	}
}
