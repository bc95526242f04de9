package main

import (
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// COMP-468: restore mode marks every pending commit stale. The backup is
// taken while bob's commit pends; after it the commit is confirmed and
// every member merges it. After the documented restore, the restored
// pending commit is expired (an EXPIRED notice on the topic, its envelope
// gone), so it neither blocks the catch-up nor gets confirmed over it:
// alice's commit is refused for catch-up, her client uploads bob's
// merged commit, which is taken (another inbox uploads it), and alice's
// own commit follows (a super admin's). Every member ends at the same
// epoch and authenticator, reading and sending.
func TestCOMP468_RestoreExpiresPendingCommits(t *testing.T) {
	for _, mode := range world.Networked {
		t.Run(mode, func(t *testing.T) {
			w := world.NewWithFlags(t, mode, 3*time.Minute, "-accept-commits", "-two-phase", "-grace-period", "0s", "-catch-up-window", "2m")
			kit := newBackupKit(t, mode, w.Regroupd)
			alice, bob, carol := w.Member("alice", world.Config{}), w.Member("bob", world.Config{}), w.Member("carol", world.Config{})
			all := []*world.Member{alice, bob, carol}
			g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Members: []string{bob.C.InboxID(), carol.C.InboxID()}})
			if err != nil {
				t.Fatal(err)
			}
			group := g.ID()
			world.SyncAll(all...)
			restored := alice.Info(group).Epoch

			events := bob.C.Events()
			done := make(chan error, 1)
			go func() { done <- bob.Conv(group).UpdateKeys(w.Ctx) }()
			var pending uint64
			for pending == 0 {
				if ev, ok := (<-events).(client.CommitPendingEvent); ok && ev.Own {
					pending = ev.CommitSequenceID
				}
			}
			kit.backup() // bob's commit pends in the copy
			for settled := false; !settled; {
				world.Round(alice, carol)
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("bob's commit: %v", err)
					}
					settled = true
				case <-time.After(50 * time.Millisecond):
				}
			}
			world.SyncAll(all...)
			world.Agree(t, group, all...)
			if got := alice.Info(group).Epoch; got != restored+1 {
				t.Fatalf("epoch %d after bob's confirmed commit; want %d", got, restored+1)
			}

			kit.putBack(true)
			waitServing(t, alice)
			es, err := alice.Transport.Query(w.Ctx, topicOf(ports.TopicGroupMessages, group), 0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			expired := false
			for _, e := range es {
				if e.GetSequenceId() == pending {
					t.Fatalf("the restored pending commit %d is still on the topic (pending %v)", pending, e.GetPending())
				}
				n := e.GetEnvelope().GetAcceptanceNotice()
				expired = expired || n.GetOutcome() == backendpb.AcceptanceNotice_EXPIRED && n.GetCommitSequenceId() == pending
			}
			if !expired {
				t.Fatalf("no EXPIRED notice of the restored pending commit %d", pending)
			}
			if err := alice.Conv(group).SetName(w.Ctx, "after the restore"); err != nil {
				t.Fatalf("alice's commit after the restore (bob's merged commit uploaded first): %v", err)
			}
			waitServing(t, bob)
			waitServing(t, carol)
			world.SyncAll(all...)
			for _, m := range all {
				if _, err := m.Conv(group).Send(w.Ctx, []byte("from "+m.Name)); err != nil {
					t.Fatalf("%s sends after the catch-up: %v", m.Name, err)
				}
			}
			world.SyncAll(all...)
			world.Agree(t, group, all...)
			for _, m := range all {
				if got := m.Info(group).Epoch; got != restored+2 {
					t.Errorf("%s at epoch %d; want %d (bob's commit and alice's)", m.Name, got, restored+2)
				}
				if n := len(heldMessages(t, m, group)); n != 3 {
					t.Errorf("%s holds %d messages; want 3", m.Name, n)
				}
				if st := m.ForkState(group); st == ports.ForkForked {
					t.Errorf("%s: forked after the catch-up", m.Name)
				}
			}
		})
	}
}
