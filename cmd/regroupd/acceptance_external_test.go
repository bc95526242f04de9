package main

import (
	"testing"

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
