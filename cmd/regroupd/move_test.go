package main

import (
	"bytes"
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/internal/rogue"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
)

// COMP-483, COMP-484: a super admin moves a group to a successor with
// the members it chooses, against regroupd with acceptance over gRPC on
// SQLite and PostgreSQL: the chosen members join the successor, every
// member of the old group (the one left out included) reports the
// pointer and reads it, and a member who is no super admin can neither
// move the group nor set the pointer (its own client refuses, regroupd
// refuses its patched client's commit).
func TestCOMP483_MoveToNewGroup(t *testing.T) {
	for _, mode := range acceptModes {
		t.Run(mode, func(t *testing.T) { moveToNewGroup(t, mode) })
	}
}

func moveToNewGroup(t *testing.T, mode string) {
	a := newAcceptance(t, mode)
	alice := a.member("alice", world.Config{})
	bob := a.member("bob", world.Config{})
	carol := a.member("carol", world.Config{})
	mallory := a.member("mallory", world.Config{})
	id := a.newGroup(alice, bob, carol, mallory)
	everyone := []*world.Member{alice, bob, carol, mallory}
	inboxes := []string{alice.C.InboxID(), bob.C.InboxID(), carol.C.InboxID(), mallory.C.InboxID()}

	if _, err := bob.Conv(id).MoveToNewGroup(a.Ctx, client.GroupOptions{Name: "b"}); !errors.Is(err, client.ErrNotPermitted) {
		t.Fatalf("a member moves the group: %v, want ErrNotPermitted", err)
	}
	before := a.highest(ports.TopicGroupMessages, id)
	if _, err := rogue.Of(bob).Commit(id, func(v ports.GroupView) (ports.CommitOptions, error) {
		d, err := metadata.FromExtensions(v.Extensions)
		if err != nil {
			return ports.CommitOptions{}, err
		}
		exts, err := d.Set(metadata.ComponentSuccessor, bytes.Repeat([]byte{7}, 32)).Apply(v.Extensions)
		return ports.CommitOptions{GroupContextExtensions: exts}, err
	}); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("a member's patched client sets the pointer: %v, want refused", err)
	}
	if a.highest(ports.TopicGroupMessages, id) != before {
		t.Fatal("the service stored a member's pointer")
	}

	for _, m := range everyone {
		drain(m)
	}
	next, err := alice.Conv(id).MoveToNewGroup(a.Ctx, client.GroupOptions{Name: "g2", Members: []string{bob.C.InboxID(), carol.C.InboxID()}})
	if err != nil {
		t.Fatalf("alice moves the group: %v", err)
	}
	world.SyncAll(everyone...)
	for _, m := range everyone {
		got, err := m.Conv(id).Successor(a.Ctx)
		if err != nil || !bytes.Equal(got, next.ID()) {
			t.Fatalf("%s reads the successor %x, %v, want %x", m.Name, got, err, next.ID())
		}
		if m != alice && !eventually(m, func(evs []any) bool { return sawSuccessor(evs, id, next.ID()) }) {
			t.Fatalf("%s reported no successor event", m.Name)
		}
	}
	honest(t, id, inboxes, everyone...)
	a.follows(id, everyone...)
	honest(t, next.ID(), []string{alice.C.InboxID(), bob.C.InboxID(), carol.C.InboxID()}, alice, bob, carol)
	if _, err := mallory.C.Conversation(a.Ctx, next.ID()); !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("mallory, left out, holds the successor: %v", err)
	}
	if _, err := bob.Conv(next.ID()).Send(a.Ctx, []byte("moved")); err != nil {
		t.Fatalf("bob sends in the successor: %v", err)
	}
}

func sawSuccessor(evs []any, id, next []byte) bool {
	for _, e := range evs {
		if s, ok := e.(client.SuccessorEvent); ok && bytes.Equal(s.GroupID, id) && bytes.Equal(s.Successor, next) {
			return true
		}
	}
	return false
}
