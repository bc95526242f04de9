package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/policy"
	"github.com/regroup-mls/regroup/internal/rogue"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
)

// COMP-381: a super admin's commit that states a role policy version
// regroupd does not know is refused (public_policy_version) and stored
// nowhere; so is the registration of a group created under such a
// version. The group goes on under its known version.
func TestCOMP381_UnknownPolicyVersionRefusedOverGRPC(t *testing.T) {
	for _, mode := range acceptModes {
		t.Run(mode, func(t *testing.T) { testUnknownPolicyVersion(t, mode) })
	}
}

func testUnknownPolicyVersion(t *testing.T, mode string) {
	a := newAcceptance(t, mode)
	mallory := a.member("mallory", world.Config{MLS: rogue.Engine})
	alice := a.member("alice", world.Config{})
	id := a.newGroup(mallory, alice)
	before := a.highest(ports.TopicGroupMessages, id)
	_, err := rogue.Of(mallory).SetPolicyVersion(id, policy.Version+41)
	if !errors.Is(err, ports.ErrInvalidArgument) || !strings.Contains(err.Error(), policy.ErrUnknownVersion.Error()) {
		t.Fatalf("a commit to an unknown policy version: %v, want a refusal naming it", err)
	}
	if a.highest(ports.TopicGroupMessages, id) != before {
		t.Fatal("the commit to an unknown policy version was stored")
	}
	a.follows(id, alice)

	eve := a.member("eve", world.Config{MLS: rogue.VersionEngine(policy.Version+41, policy.Version)})
	// eve's client registers the group as it creates it: refused.
	g, err := eve.C.CreateGroup(a.Ctx, client.GroupOptions{Name: "unknown rules"})
	if g == nil || !errors.Is(err, ports.ErrInvalidArgument) || !strings.Contains(err.Error(), policy.ErrUnknownVersion.Error()) {
		t.Fatalf("creating a group of an unknown policy version: %v, want its registration refused naming it", err)
	}
	if err := a.publishInfo(eve, g.ID(), groupInfo(t, eve, g.ID())); !errors.Is(err, ports.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), policy.ErrUnknownVersion.Error()) {
		t.Fatalf("registration of a group of an unknown policy version: %v, want a refusal naming it", err)
	}
	if _, err := a.store.PublicState(a.Ctx, g.ID()); !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("the refused registration left a state: %v", err)
	}
}

// COMP-382: a viewer whose patched client commits beyond its own leaf
// (a rename, the removal of another installation of its own inbox) is
// refused by the role policy (public_policy) and the commit is stored
// nowhere; the viewer's own key update passes.
func TestCOMP382_ViewerCommitRefusedOverGRPC(t *testing.T) {
	for _, mode := range acceptModes {
		t.Run(mode, func(t *testing.T) { testViewerCommitRefused(t, mode) })
	}
}

func testViewerCommitRefused(t *testing.T, mode string) {
	a := newAcceptance(t, mode)
	alice := a.member("alice", world.Config{MLS: rogue.Engine})
	_, recovery, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	mallory := a.member("mallory", world.Config{MLS: rogue.Engine, RecoveryKey: recovery})
	phone := a.member("mallory's phone", world.Config{RecoveryKey: recovery}) // another installation of her inbox
	id := a.newGroup(alice, mallory)
	if _, err := rogue.Of(alice).SetViewers(id, mallory.C.InboxID()); err != nil {
		t.Fatalf("the super admin makes mallory a viewer: %v", err)
	}
	world.SyncAll(alice, mallory)
	before := a.highest(ports.TopicGroupMessages, id)
	_, err = rogue.Of(mallory).Rename(id, "a viewer's name")
	if !errors.Is(err, ports.ErrInvalidArgument) || !strings.Contains(err.Error(), "role policy") {
		t.Fatalf("a viewer's rename: %v, want a refusal by the role policy", err)
	}
	if a.highest(ports.TopicGroupMessages, id) != before {
		t.Fatal("the viewer's rename was stored")
	}
	// Removing another installation of one's own inbox is any member's
	// right but a viewer's (COMP-389).
	_, err = rogue.Of(mallory).Commit(id, func(v ports.GroupView) (ports.CommitOptions, error) {
		for _, m := range v.Members {
			if bytes.Equal(m.SignatureKey, phone.C.InstallationKey()) {
				return ports.CommitOptions{Remove: []uint32{m.LeafIndex}}, nil
			}
		}
		return ports.CommitOptions{}, errors.New("her phone holds no leaf")
	})
	if !errors.Is(err, ports.ErrInvalidArgument) || !strings.Contains(err.Error(), "viewer") {
		t.Fatalf("a viewer removes its own other installation: %v, want a refusal by the viewer rule", err)
	}
	if a.highest(ports.TopicGroupMessages, id) != before {
		t.Fatal("the viewer's removal was stored")
	}
	if err := mallory.Conv(id).UpdateKeys(a.Ctx); err != nil {
		t.Fatalf("the viewer's own key update: %v", err)
	}
	world.SyncAll(alice, mallory)
	world.Agree(t, id, alice, mallory)
	a.follows(id, alice, mallory)
}
