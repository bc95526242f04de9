package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/core/policy"
	"github.com/regroup-mls/regroup/internal/rogue"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
)

// COMP-375: with acceptance on, regroupd judges an external commit by the
// role policy's rule (policy.External), reading the joiner's association
// from the identity updates it stores: a member's resync, its
// installation associated with its inbox, is admitted and followed.
// (The refusals are the rule's own tests, core/policy's COMP-396 cases;
// the engine's validator already refuses the external commits a member
// could forge over its own leaf.)
func TestCOMP375_ResyncAdmittedByTheRoleRule(t *testing.T) {
	a := newAcceptance(t, "sqlite")
	alice := a.member("alice", world.Config{})
	mallory := a.member("mallory", world.Config{MLS: rogue.Engine})
	id := a.newGroup(alice, mallory)
	before := a.highest(ports.TopicGroupMessages, id)
	if _, err := rogue.Of(mallory).ExternalCommit(id, mallory.C.InboxID(), true); err != nil {
		t.Fatalf("mallory's resync: %v", err)
	}
	if a.highest(ports.TopicGroupMessages, id) == before {
		t.Fatal("the resync was not stored")
	}
	world.SyncAll(alice)
	a.follows(id, alice)
}

// COMP-375, COMP-396: external commits that are neither a resync nor a
// recovery join, published to regroupd over gRPC, are refused by the
// role policy (public_policy, naming what was wrong) and stored nowhere,
// and the group goes on: an outsider's plain join from the GroupInfo the
// service serves, and a recovery join that removes a member's leaf under
// its inbox by an installation that inbox never associated (the service
// reads the association from the identity updates it stores).
func TestCOMP375_OtherExternalCommitsRefusedOverGRPC(t *testing.T) {
	for _, mode := range acceptModes {
		t.Run(mode, func(t *testing.T) {
			a := newAcceptance(t, mode)
			alice, bob := a.member("alice", world.Config{}), a.member("bob", world.Config{})
			eve := a.member("eve", world.Config{MLS: rogue.Engine})
			id := a.newGroup(alice, bob)
			forgeries := []struct {
				name   string
				reason string
				forge  func() (uint64, error)
			}{
				{"an outsider's join", policy.ExternalRemoves, func() (uint64, error) { return rogue.Of(eve).JoinAsOutsider(id, eve.C.InboxID(), false) }},
				{"a recovery join by an installation not of the inbox", policy.ExternalAssociation, func() (uint64, error) {
					return rogue.Of(eve).JoinAsOutsider(id, bob.C.InboxID(), true)
				}},
			}
			for _, f := range forgeries {
				before := a.highest(ports.TopicGroupMessages, id)
				_, err := f.forge()
				if !errors.Is(err, ports.ErrInvalidArgument) || !strings.Contains(err.Error(), policy.ErrExternalRefused.Error()+" ("+f.reason+")") {
					t.Fatalf("%s: %v, want a refusal by the external-commit rule (%s)", f.name, err, f.reason)
				}
				if got := a.highest(ports.TopicGroupMessages, id); got != before {
					t.Fatalf("%s: the refused external commit was stored (highest %d → %d)", f.name, before, got)
				}
				// The group goes on.
				if err := bob.Conv(id).UpdateKeys(a.Ctx); err != nil {
					t.Fatalf("%s: the next honest commit: %v", f.name, err)
				}
				world.SyncAll(alice, bob)
				world.Agree(t, id, alice, bob)
				a.follows(id, alice, bob)
			}
		})
	}
}
