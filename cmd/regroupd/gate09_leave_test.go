package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/internal/rogue"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
)

// Gate 9 (ADR-0030 Decision 7, COMP-475 to COMP-479), against regroupd
// over gRPC on SQLite and PostgreSQL: a viewer's and a two-device
// member's leave requests each stop delivery to every installation of
// the user at once and are followed by an owner's removal; a message of
// the leave kind that carries content is discarded by every client; the
// last owner cannot leave before making another member an owner.
func TestGate09_LeaveRequests(t *testing.T) {
	for _, mode := range acceptModes {
		t.Run(mode, func(t *testing.T) { gate09(t, mode) })
	}
}

func gate09(t *testing.T, mode string) {
	a := newAcceptance(t, mode)
	alice := a.member("alice", world.Config{})
	bob := a.member("bob", world.Config{})
	bob2 := a.Member("bob2", world.Config{RecoveryKey: bob.C.Identity().RecoveryKey})
	carol := a.member("carol", world.Config{})
	dave := a.member("dave", world.Config{})
	eve := a.member("eve", world.Config{})
	id := a.newGroup(alice, bob, carol, dave, eve)
	world.SyncAll(alice, bob, bob2, carol, dave, eve)
	if err := alice.Conv(id).SetRole(a.Ctx, carol.C.InboxID(), client.RoleViewer); err != nil {
		t.Fatalf("alice makes carol a viewer: %v", err)
	}
	world.SyncAll(alice, bob, bob2, carol, dave, eve)
	all := []string{alice.C.InboxID(), bob.C.InboxID(), carol.C.InboxID(), dave.C.InboxID(), eve.C.InboxID()}
	honest(t, id, all, alice, bob, bob2, carol, dave, eve)

	// COMP-477: the last owner cannot leave; nothing is published.
	before := a.highest(ports.TopicGroupMessages, id)
	if err := alice.Conv(id).Leave(a.Ctx); !errors.Is(err, client.ErrLastSuperAdmin) {
		t.Fatalf("the only super admin leaves: %v, want ErrLastSuperAdmin", err)
	}
	if a.highest(ports.TopicGroupMessages, id) != before {
		t.Fatal("the last super admin's refused leave published something")
	}

	// A viewer's leave request: accepted by the service, delivery to
	// carol stops at it, nothing more accepted from her, and alice's
	// client removes her.
	drain(alice)
	if err := carol.Conv(id).Leave(a.Ctx); err != nil {
		t.Fatalf("the viewer leaves: %v", err)
	}
	carolLeave := a.highest(ports.TopicGroupMessages, id)
	a.cutOff(id, carolLeave, alice, carol)
	if _, err := rogue.Of(carol).Send(id, ports.MessageApplication, []byte("still here")); !errors.Is(err, ports.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "left group") {
		t.Fatalf("a message from the viewer who left: %v, want refused", err)
	}
	if _, err := carol.Conv(id).Send(a.Ctx, []byte("x")); !errors.Is(err, client.ErrLeft) {
		t.Fatalf("the viewer's own client sends after leaving: %v, want ErrLeft", err)
	}
	world.SyncAll(alice, bob, bob2, dave, eve)
	all = []string{alice.C.InboxID(), bob.C.InboxID(), dave.C.InboxID(), eve.C.InboxID()}
	honest(t, id, all, alice, bob, bob2, dave, eve)
	if !eventually(alice, func(evs []any) bool { return sawLeave(evs, carol.C.InboxID()) }) {
		t.Fatal("alice's client reported no leave request of carol")
	}

	// A member with two installations leaves from one: both stop at once.
	if err := bob.Conv(id).Leave(a.Ctx); err != nil {
		t.Fatalf("bob leaves: %v", err)
	}
	bobLeave := a.highest(ports.TopicGroupMessages, id)
	a.cutOff(id, bobLeave, alice, bob, bob2)
	bob2.Sync()
	if left, err := bob2.Conv(id).Left(a.Ctx); err != nil || !left {
		t.Fatalf("bob's other installation read the request: left %v, %v", left, err)
	}
	if _, err := bob2.Conv(id).Send(a.Ctx, []byte("x")); !errors.Is(err, client.ErrLeft) {
		t.Fatalf("bob's other installation sends after the leave: %v, want ErrLeft", err)
	}
	if _, err := rogue.Of(bob2).Send(id, ports.MessageApplication, []byte("x")); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("a message from bob's other installation after the leave: %v, want refused", err)
	}

	// A new installation of bob's cannot join back by external commit:
	// the service accepts no commit by the inbox that left.
	bob3 := a.Member("bob3", world.Config{RecoveryKey: bob.C.Identity().RecoveryKey})
	if _, err := bob3.C.RecoverGroup(a.Ctx, id); !errors.Is(err, ports.ErrInvalidArgument) || !strings.Contains(err.Error(), "who left group") {
		t.Fatalf("a recovery join by a new installation of bob's after he left: %v, want refused", err)
	}

	// A message of the leave kind with content: the service cannot tell
	// (it reads the kind only) and blocks its sender, who asked for it;
	// every client discards it: no leave event, no removal.
	drain(dave)
	if _, err := rogue.Of(eve).Send(id, ports.MessageLeaveRequest, []byte("not a leave")); err != nil {
		t.Fatalf("eve's leave-kind message with content: %v", err)
	}
	world.SyncAll(alice, dave)
	all = []string{alice.C.InboxID(), dave.C.InboxID(), eve.C.InboxID()}
	honest(t, id, all, alice, dave)
	if sawLeave(drain(dave), eve.C.InboxID()) {
		t.Fatal("dave's client took a leave-kind message with content for a leave request")
	}

	// The last owner makes dave one, then leaves; dave's client removes
	// alice and her role.
	if err := alice.Conv(id).SetRole(a.Ctx, dave.C.InboxID(), client.RoleSuperAdmin); err != nil {
		t.Fatal(err)
	}
	if err := alice.Conv(id).Leave(a.Ctx); err != nil {
		t.Fatalf("alice leaves with another super admin: %v", err)
	}
	world.SyncAll(dave)
	honest(t, id, []string{dave.C.InboxID(), eve.C.InboxID()}, dave)
	if r, err := dave.Conv(id).Role(a.Ctx, dave.C.InboxID()); err != nil || r != client.RoleSuperAdmin {
		t.Fatalf("dave's role after alice left: %v, %v", r, err)
	}
	if info := dave.Info(id); len(info.SuperAdmins) != 1 {
		t.Fatalf("super admins after alice's removal: %q", info.SuperAdmins)
	}
	a.follows(id, dave)
}

// cutOff checks that, right after a leave request at sequence id leave,
// the service serves none of the group's later messages to the leaving
// user's installations: sender publishes one, and each installation's
// query and highest id stop at the request.
func (a *acceptance) cutOff(id []byte, leave uint64, sender *world.Member, leavers ...*world.Member) {
	a.t.Helper()
	seq, err := sender.Conv(id).Send(a.Ctx, []byte("after the leave"))
	if err != nil || seq <= leave {
		a.t.Fatalf("%s sends after the leave: %d, %v", sender.Name, seq, err)
	}
	topic := topicOf(ports.TopicGroupMessages, id)
	for _, m := range leavers {
		envs, err := m.Transport.Query(a.Ctx, topic, leave-1, 100)
		if err != nil {
			a.t.Fatalf("%s queries: %v", m.Name, err)
		}
		if len(envs) != 1 || envs[0].GetSequenceId() != leave {
			a.t.Fatalf("%s was served %d envelopes after the leave request %d, want the request alone", m.Name, len(envs), leave)
		}
		if n, err := m.Transport.HighestSequenceID(a.Ctx, topic); err != nil || n != leave {
			a.t.Fatalf("%s's highest id %d, %v, want the request's %d", m.Name, n, err, leave)
		}
		a.subscribedUpTo(m, topic, leave)
	}
	if n, err := sender.Transport.HighestSequenceID(a.Ctx, topic); err != nil || n != seq {
		a.t.Fatalf("%s's highest id %d, %v, want %d", sender.Name, n, err, seq)
	}
}

// subscribedUpTo checks that a subscription of the member's from just
// before the leave request hands out the request and then nothing.
func (a *acceptance) subscribedUpTo(m *world.Member, topic []byte, leave uint64) {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(a.Ctx, 5*time.Second)
	defer cancel()
	sub, err := m.Transport.Subscribe(ctx, []ports.TopicCursor{{Topic: topic, After: leave - 1}})
	if err != nil {
		a.t.Fatalf("%s subscribes: %v", m.Name, err)
	}
	defer sub.Close()
	if e, err := sub.Next(ctx); err != nil || e.GetSequenceId() != leave {
		a.t.Fatalf("%s's subscription first hands out %d, %v, want the request %d", m.Name, e.GetSequenceId(), err, leave)
	}
	wait, stop := context.WithTimeout(ctx, 300*time.Millisecond)
	defer stop()
	if e, err := sub.Next(wait); err == nil {
		a.t.Fatalf("%s's subscription handed out %d after the leave request", m.Name, e.GetSequenceId())
	}
}

func sawLeave(evs []any, inbox string) bool {
	for _, e := range evs {
		if l, ok := e.(client.LeaveRequestEvent); ok && l.InboxID == inbox {
			return true
		}
	}
	return false
}
