package acceptance_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/client"
	hostile "github.com/regroup-mls/regroup/internal/hostile/acceptance"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// TestGate07_StuckDeviceRepairedByOwnersReadd: COMP-452, COMP-453 — a
// device that cannot process a confirmed commit (its path secret was
// wrong) and does not resync by itself (COMP-454) reports stuck; the
// super admin reads the stuck installation from its StuckReportEvent and
// re-adds it with a fresh key package in one commit of its own (one
// phase); the stuck device takes that Welcome in place of its active
// state, reads and sends again, and ends at the group's epoch.
func TestGate07_StuckDeviceRepairedByOwnersReadd(t *testing.T) {
	eachDB(t, func(t *testing.T, mode string) {
		g := newGate(t, mode)
		alice, bob := g.Member("alice", world.Config{}), g.Member("bob", world.Config{})
		carol := g.Member("carol", world.Config{Options: &client.Options{DisableStuckResync: true}})
		events := alice.C.Events()
		h := hostile.New(g.World, "mallory")
		id := g.group(alice, []*world.Member{h.Member, bob, carol}, nil)
		owners, err := h.Leaves(id, alice.C.InboxID())
		if err != nil {
			t.Fatal(err)
		}
		bobs, err := h.Leaves(id, bob.C.InboxID())
		if err != nil {
			t.Fatal(err)
		}
		seq, err := h.Commit(id, hostile.Lie{PathTo: append(owners, bobs...)}) // carol's secret is wrong
		if err != nil {
			t.Fatal(err)
		}
		world.Round(alice, bob) // carol is offline
		g.notice(alice, id, seq, backendpb.AcceptanceNotice_CONFIRMED)
		world.Round(alice, bob)
		stuck := carol.Info(id)
		if err := carol.C.SyncAll(g.Ctx); err != nil {
			t.Logf("carol: %v", err)
		}
		st := g.notice(alice, id, seq, backendpb.AcceptanceNotice_STUCK)
		if verdicts(st)[carol.C.InboxID()] != "STUCK/path" {
			t.Fatalf("carol's stuck report: %v", verdicts(st))
		}

		world.Round(alice, bob)
		report := stuckReport(t, events, carol.C.InboxID())
		if !bytes.Equal(report.InstallationKey, carol.C.InstallationKey()) || report.CommitSequenceID != seq {
			t.Fatalf("alice's stuck report names installation %x commit %d, want carol's %x commit %d",
				report.InstallationKey, report.CommitSequenceID, carol.C.InstallationKey(), seq)
		}
		if got := carol.Info(id); got.Epoch != stuck.Epoch || !got.Active {
			t.Fatalf("carol at epoch %d (active %v) before the re-add, stuck at %d: she must not have resynced", got.Epoch, got.Active, stuck.Epoch)
		}

		readd, err := alice.Conv(id).Readd(g.Ctx, report.InstallationKey)
		if err != nil {
			t.Fatalf("alice's re-add of carol: %v", err)
		}
		if hasNotice(g, alice, id, readd, backendpb.AcceptanceNotice_CONFIRMED) {
			t.Fatal("the super admin's re-add pended: want one phase")
		}
		world.Round(alice, bob)
		deadline := time.Now().Add(20 * time.Second)
		for !sameAuth(alice, carol, id) {
			if time.Now().After(deadline) {
				var why []string
				held, _ := carol.C.HeldWelcomes(g.Ctx)
				for _, h := range held {
					why = append(why, "held: "+h.Reason)
				}
				rejected, _ := carol.C.RejectedWelcomes(g.Ctx)
				for _, r := range rejected {
					why = append(why, "rejected: "+r.Rule+": "+r.Reason)
				}
				t.Fatalf("carol never took the re-add's Welcome: epoch %d, alice's %d; %v", epoch(carol, id), epoch(alice, id), why)
			}
			carol.Sync()
			time.Sleep(20 * time.Millisecond)
		}
		if got := carol.Info(id); got.Epoch <= stuck.Epoch+1 {
			t.Fatalf("carol at epoch %d, stuck at %d: want past the confirmed commit and the re-add", got.Epoch, stuck.Epoch)
		}
		carol.Sync()
		carol.Tx(func(tx ports.Tx) error {
			if b, err := tx.Blobs().Get(g.Ctx, "client.stuck", hex.EncodeToString(id)); !errors.Is(err, ports.ErrNotFound) {
				gr, _ := tx.Groups().Get(g.Ctx, id)
				t.Errorf("carol's stuck record after the re-add: %s %v (join anchor %d, cursor %d), want none", b, err, gr.JoinAnchor, gr.Cursor)
			}
			return nil
		})

		if _, err := carol.Conv(id).Send(g.Ctx, []byte("back after the re-add")); err != nil {
			t.Fatalf("carol sends after the re-add: %v", err)
		}
		if _, err := alice.Conv(id).Send(g.Ctx, []byte("welcome back")); err != nil {
			t.Fatal(err)
		}
		world.SyncAll(alice, bob, carol)
		read(t, alice, id, "back after the re-add")
		read(t, bob, id, "back after the re-add")
		read(t, carol, id, "welcome back")
		g.honest(id, []string{h.C.InboxID()}, alice, bob, carol)
	})
}

// stuckReport waits for the StuckReportEvent a member reads about inbox's
// stuck installation.
func stuckReport(t *testing.T, events <-chan client.Event, inbox string) client.StuckReportEvent {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev := <-events:
			if s, ok := ev.(client.StuckReportEvent); ok && !s.Own && s.InboxID == inbox {
				return s
			}
		case <-timeout:
			t.Fatalf("no stuck report about %s", inbox)
		}
	}
}

// read fails unless m holds an application message with content in the
// group.
func read(t *testing.T, m *world.Member, id []byte, content string) {
	t.Helper()
	ms, err := m.Conv(id).Messages(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ms {
		if x.Kind == ports.MessageApplication && string(x.Content) == content {
			return
		}
	}
	t.Fatalf("%s does not hold %q", m.Name, content)
}
