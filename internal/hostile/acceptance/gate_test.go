package acceptance_test

import (
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/core/client"
	hostile "github.com/regroup-mls/regroup/internal/hostile/acceptance"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// TestGate01_CorruptedViewerCommitDroppedAtFirstRefusal: a viewer's
// commit with a corrupted membership tag pends; the first witness's
// refusal (reason tag) drops it, the viewer's inbox is quarantined (its
// next commit refused with ErrQuarantined), and the group goes on: a
// member's commit is confirmed by the others' reports.
func TestGate01_CorruptedViewerCommitDroppedAtFirstRefusal(t *testing.T) {
	eachDB(t, func(t *testing.T, mode string) {
		g := newGate(t, mode)
		alice, bob, carol := g.Member("alice", world.Config{}), g.Member("bob", world.Config{}), g.Member("carol", world.Config{})
		v := hostile.New(g.World, "viewer")
		id := g.group(alice, []*world.Member{bob, carol}, []*world.Member{v.Member})
		e0 := epoch(alice, id)

		seq, err := v.Commit(id, hostile.Lie{CorruptTag: true})
		if err != nil {
			t.Fatal(err)
		}
		bob.Sync() // the first witness refuses
		n := g.notice(alice, id, seq, backendpb.AcceptanceNotice_DROPPED)
		if got := verdicts(n)[bob.C.InboxID()]; got != "REFUSED/tag" {
			t.Fatalf("bob's report in the drop: %q, want REFUSED/tag (%v)", got, verdicts(n))
		}
		g.notice(alice, id, 0, backendpb.AcceptanceNotice_QUARANTINED)
		if _, err := v.Commit(id, hostile.Lie{}); !errors.Is(err, ports.ErrQuarantined) {
			t.Fatalf("the quarantined viewer's next commit: %v, want ErrQuarantined", err)
		}
		world.SyncAll(alice, bob, carol)
		for _, m := range []*world.Member{alice, bob, carol} {
			if epoch(m, id) != e0 {
				t.Fatalf("%s at epoch %d after the drop, want %d", m.Name, epoch(m, id), e0)
			}
		}
		// The group goes on: bob's key update pends and is confirmed.
		done := async(func() error { return bob.Conv(id).UpdateKeys(g.Ctx) })
		if err := g.until(done, alice, carol); err != nil {
			t.Fatalf("bob's commit after the drop: %v", err)
		}
		g.honest(id, []string{v.C.InboxID()}, alice, bob, carol)
		if epoch(alice, id) != e0+1 {
			t.Fatalf("epoch %d, want %d", epoch(alice, id), e0+1)
		}
	})
}

// TestGate01_WithoutTwoPhasesTheGroupIsStuck: with commit acceptance in
// one phase only, the same corrupted commit takes the epoch on the
// service, every honest member refuses it, and no honest commit can
// follow: the stall two phases prevent.
func TestGate01_WithoutTwoPhasesTheGroupIsStuck(t *testing.T) {
	eachDB(t, func(t *testing.T, mode string) {
		g := newGate(t, mode, "-two-phase=false")
		alice, bob, carol := g.Member("alice", world.Config{}), g.Member("bob", world.Config{}), g.Member("carol", world.Config{})
		v := hostile.New(g.World, "viewer")
		id := g.group(alice, []*world.Member{bob, carol}, []*world.Member{v.Member})
		e0 := epoch(alice, id)
		if _, err := v.Commit(id, hostile.Lie{CorruptTag: true}); err != nil {
			t.Fatal(err)
		}
		world.SyncAll(alice, bob, carol)
		err := bob.Conv(id).UpdateKeys(g.Ctx)
		if err == nil {
			t.Fatal("an honest commit went through after the corrupted one took the epoch")
		}
		err = alice.Conv(id).UpdateKeys(g.Ctx)
		if err == nil || !errors.Is(err, client.ErrCommitLost) {
			t.Fatalf("the super admin's commit: %v, want ErrCommitLost (the group is stuck)", err)
		}
		for _, m := range []*world.Member{alice, bob, carol} {
			if epoch(m, id) != e0 {
				t.Fatalf("%s moved to epoch %d", m.Name, epoch(m, id))
			}
		}
	})
}

// TestGate02_SelectivePathDroppedDespiteOwnersOK: a member's commit whose
// path secrets are right for the owner's device only: the owner reports
// OK, another member refuses (reason path), and the refusal drops it.
func TestGate02_SelectivePathDroppedDespiteOwnersOK(t *testing.T) {
	eachDB(t, func(t *testing.T, mode string) {
		g := newGate(t, mode, "-grace-period", raceGrace.String())
		alice, bob, carol := g.Member("alice", world.Config{}), g.Member("bob", world.Config{}), g.Member("carol", world.Config{})
		h := hostile.New(g.World, "mallory")
		// mallory's leaf next to alice's: its path's first node is
		// encrypted to alice's leaf alone.
		id := g.group(alice, []*world.Member{h.Member, bob, carol}, nil)
		e0 := epoch(alice, id)
		owner, err := h.Leaves(id, alice.C.InboxID())
		if err != nil || len(owner) == 0 {
			t.Fatal(owner, err)
		}
		seq, err := h.Commit(id, hostile.Lie{PathTo: owner})
		if err != nil {
			t.Fatal(err)
		}
		alice.Sync() // the owner processes it: OK
		world.Round(bob, carol)
		n := g.notice(alice, id, seq, backendpb.AcceptanceNotice_DROPPED)
		vs := verdicts(n)
		if vs[alice.C.InboxID()] != "OK/" {
			t.Fatalf("the owner's report: %q, want OK (%v)", vs[alice.C.InboxID()], vs)
		}
		refused := vs[bob.C.InboxID()] == "REFUSED/path" || vs[carol.C.InboxID()] == "REFUSED/path"
		if !refused {
			t.Fatalf("no member refused with reason path: %v", vs)
		}
		g.honest(id, []string{h.C.InboxID()}, alice, bob, carol)
		if epoch(alice, id) != e0 {
			t.Fatalf("epoch %d after the drop, want %d", epoch(alice, id), e0)
		}
		done := async(func() error { return carol.Conv(id).UpdateKeys(g.Ctx) })
		if err := g.until(done, alice, bob); err != nil {
			t.Fatal(err)
		}
		g.honest(id, []string{h.C.InboxID()}, alice, bob, carol)
	})
}

// TestGate06_OwnersCommitSupersedesPending: a super admin's commit of the
// current epoch supersedes a member's pending commit, without quarantine;
// the member's client builds its change again on the new epoch, and that
// is confirmed.
func TestGate06_OwnersCommitSupersedesPending(t *testing.T) {
	eachDB(t, func(t *testing.T, mode string) {
		g := newGate(t, mode, "-grace-period", raceGrace.String())
		alice, bob, carol := g.Member("alice", world.Config{}), g.Member("bob", world.Config{}), g.Member("carol", world.Config{})
		id := g.group(alice, []*world.Member{bob, carol}, nil)
		e0 := epoch(alice, id)
		events := bob.C.Events()
		done := async(func() error { return bob.Conv(id).UpdateKeys(g.Ctx) })
		var seq uint64
		for seq == 0 {
			if ev, ok := (<-events).(client.CommitPendingEvent); ok && ev.Own {
				seq = ev.CommitSequenceID
			}
		}
		if err := alice.Conv(id).SetName(g.Ctx, "renamed"); err != nil {
			t.Fatalf("the super admin's commit while another pends: %v", err)
		}
		g.notice(alice, id, seq, backendpb.AcceptanceNotice_SUPERSEDED)
		if err := g.until(done, alice, carol); err != nil {
			t.Fatalf("bob's superseded change, built again: %v", err)
		}
		g.honest(id, nil, alice, bob, carol)
		if epoch(alice, id) != e0+2 || alice.Info(id).Name != "renamed" {
			t.Fatalf("epoch %d name %q, want %d and the rename", epoch(alice, id), alice.Info(id).Name, e0+2)
		}
		if hasNotice(g, alice, id, seq, backendpb.AcceptanceNotice_QUARANTINED) {
			t.Fatal("a supersession quarantined")
		}
	})
}

// TestGate08_PendingCommitSurvivesRegroupdKill: a member's pending commit
// survives a SIGKILL and restart of regroupd, is witnessed after it and
// confirmed by the restarted service; the committer merges it then.
func TestGate08_PendingCommitSurvivesRegroupdKill(t *testing.T) {
	eachDB(t, func(t *testing.T, mode string) {
		g := newGate(t, mode)
		alice, bob, carol := g.Member("alice", world.Config{}), g.Member("bob", world.Config{}), g.Member("carol", world.Config{})
		id := g.group(alice, []*world.Member{bob, carol}, nil)
		e0 := epoch(alice, id)
		events := bob.C.Events()
		done := async(func() error { return bob.Conv(id).UpdateKeys(g.Ctx) })
		var seq uint64
		for seq == 0 {
			if ev, ok := (<-events).(client.CommitPendingEvent); ok && ev.Own {
				seq = ev.CommitSequenceID
			}
		}
		g.Regroupd.Restart() // SIGKILL, then start again on the same database
		if err := g.until(done, alice, carol); err != nil {
			t.Fatalf("bob's commit across the restart: %v (unavailable %v, awaiting %v)", err, errors.Is(err, ports.ErrUnavailable), errors.Is(err, client.ErrCommitAwaiting))
		}
		if !hasNotice(g, alice, id, seq, backendpb.AcceptanceNotice_CONFIRMED) {
			t.Fatal("no confirmation of the commit pending across the restart")
		}
		g.honest(id, nil, alice, bob, carol)
		if epoch(bob, id) != e0+1 {
			t.Fatalf("epoch %d, want %d", epoch(bob, id), e0+1)
		}
	})
}

// TestGate05_ExpiredCommitWithoutQuarantineRetried: a member's commit
// nobody reports on expires after the time-out, nobody is quarantined,
// and the committer's client builds the change again, which witnesses
// then confirm.
func TestGate05_ExpiredCommitWithoutQuarantineRetried(t *testing.T) {
	eachDB(t, func(t *testing.T, mode string) {
		g := newGate(t, mode, "-pending-expiry", "300ms")
		alice, bob, carol := g.Member("alice", world.Config{}), g.Member("bob", world.Config{}), g.Member("carol", world.Config{})
		id := g.group(alice, []*world.Member{bob, carol}, nil)
		e0 := epoch(alice, id)
		events := bob.C.Events()
		done := async(func() error { return bob.Conv(id).UpdateKeys(g.Ctx) })
		var seq uint64
		for seq == 0 {
			if ev, ok := (<-events).(client.CommitPendingEvent); ok && ev.Own {
				seq = ev.CommitSequenceID
			}
		}
		g.notice(alice, id, seq, backendpb.AcceptanceNotice_EXPIRED) // nobody reported
		if err := g.until(done, alice, carol); err != nil {
			t.Fatalf("bob's expired change, built again: %v", err)
		}
		if hasNotice(g, alice, id, seq, backendpb.AcceptanceNotice_QUARANTINED) {
			t.Fatal("an expiry quarantined")
		}
		g.honest(id, nil, alice, bob, carol)
		if epoch(alice, id) != e0+1 {
			t.Fatalf("epoch %d, want %d", epoch(alice, id), e0+1)
		}
	})
}

// TestGate03_ConfirmedWhileOfflineStuckReportsQuarantineResync: a commit
// whose path secrets only the owner's device can read is confirmed on the
// owner's OK while the other members are offline; back online, each finds
// it cannot process the confirmed commit, reports stuck (reason path),
// which quarantines the committer's inbox afterwards, and resyncs.
func TestGate03_ConfirmedWhileOfflineStuckReportsQuarantineResync(t *testing.T) {
	eachDB(t, func(t *testing.T, mode string) {
		g := newGate(t, mode)
		alice, bob, carol := g.Member("alice", world.Config{}), g.Member("bob", world.Config{}), g.Member("carol", world.Config{})
		h := hostile.New(g.World, "mallory")
		id := g.group(alice, []*world.Member{h.Member, bob, carol}, nil)
		owner, err := h.Leaves(id, alice.C.InboxID())
		if err != nil {
			t.Fatal(err)
		}
		seq, err := h.Commit(id, hostile.Lie{PathTo: owner})
		if err != nil {
			t.Fatal(err)
		}
		alice.Sync() // bob and carol are offline
		g.notice(alice, id, seq, backendpb.AcceptanceNotice_CONFIRMED)
		alice.Sync()
		if hasNotice(g, alice, id, 0, backendpb.AcceptanceNotice_QUARANTINED) {
			t.Fatal("quarantined before any stuck report")
		}
		for _, m := range []*world.Member{bob, carol} {
			done := async(func() error { return m.C.SyncAll(g.Ctx) }) // stuck: report, then resync
			if err := g.until(done, alice); err != nil {
				t.Logf("%s: %v", m.Name, err)
			}
		}
		n := g.notice(alice, id, 0, backendpb.AcceptanceNotice_QUARANTINED)
		if string(n.GetInboxId()) != h.C.InboxID() {
			t.Fatalf("quarantined %q, want the committer", n.GetInboxId())
		}
		st := g.notice(alice, id, seq, backendpb.AcceptanceNotice_STUCK)
		if vs := verdicts(st); vs[bob.C.InboxID()] != "STUCK/path" && vs[carol.C.InboxID()] != "STUCK/path" {
			t.Fatalf("stuck reports %v, want STUCK/path", vs)
		}
		g.honest(id, []string{h.C.InboxID()}, alice, bob, carol)
	})
}

// TestGate04_LyingWitnessAndFalseStuckLiftedAndRemoved: a lying witness's
// refusal drops an honest commit and quarantines its committer; an owner
// lifts the quarantine and removes the liar. Another liar's false stuck
// report after a confirmation quarantines the committer again; the owner
// lifts and removes that liar too, and the committer commits again.
func TestGate04_LyingWitnessAndFalseStuckLiftedAndRemoved(t *testing.T) {
	eachDB(t, func(t *testing.T, mode string) {
		g := newGate(t, mode)
		alice, bob, carol := g.Member("alice", world.Config{}), g.Member("bob", world.Config{}), g.Member("carol", world.Config{})
		liar1, liar2 := hostile.New(g.World, "liar1"), hostile.New(g.World, "liar2")
		id := g.group(alice, []*world.Member{bob, carol, liar1.Member, liar2.Member}, nil)
		honest := []*world.Member{alice, bob, carol}
		lift := func(inbox string, remove *hostile.Member) {
			t.Helper()
			if err := alice.Conv(id).LiftQuarantine(g.Ctx, inbox); err != nil {
				t.Fatalf("lift: %v", err)
			}
			if err := alice.Conv(id).RemoveMembers(g.Ctx, remove.C.InboxID()); err != nil {
				t.Fatalf("removing the liar: %v", err)
			}
			world.SyncAll(honest...)
			if q, _ := bob.Conv(id).Quarantined(g.Ctx); len(q) != 0 {
				t.Fatalf("quarantine list after the lift: %v", q)
			}
		}

		liar1.LieAsWitness(ports.ReportTag)
		done := async(func() error { return bob.Conv(id).UpdateKeys(g.Ctx) })
		if err := g.until(done, liar1.Member); !errors.Is(err, client.ErrCommitDropped) {
			t.Fatalf("bob's commit refused by the liar: %v, want ErrCommitDropped", err)
		}
		world.SyncAll(honest...)
		if q, _ := carol.Conv(id).Quarantined(g.Ctx); len(q) != 1 || q[0] != bob.C.InboxID() {
			t.Fatalf("quarantine list after the lie: %v", q)
		}
		lift(bob.C.InboxID(), liar1)

		events := bob.C.Events()
		done = async(func() error { return bob.Conv(id).UpdateKeys(g.Ctx) })
		if err := g.until(done, alice, carol); err != nil {
			t.Fatal(err)
		}
		var seq uint64
		for seq == 0 {
			if ev, ok := (<-events).(client.CommitDecisionEvent); ok && ev.Own && ev.Outcome == "confirmed" {
				seq = ev.CommitSequenceID
			}
		}
		liar2.Sync()
		if err := liar2.FalseStuck(id, seq, ports.ReportTag); err != nil {
			t.Fatal(err)
		}
		g.notice(alice, id, seq, backendpb.AcceptanceNotice_STUCK)
		world.SyncAll(honest...)
		if q, _ := carol.Conv(id).Quarantined(g.Ctx); len(q) != 1 || q[0] != bob.C.InboxID() {
			t.Fatalf("quarantine list after the false stuck report: %v", q)
		}
		lift(bob.C.InboxID(), liar2)

		done = async(func() error { return bob.Conv(id).UpdateKeys(g.Ctx) })
		if err := g.until(done, alice, carol); err != nil {
			t.Fatalf("bob's commit after the lifts: %v", err)
		}
		g.honest(id, nil, honest...)
	})
}

// TestGate07_StuckDeviceRepairedByResync: a device that cannot process
// a confirmed commit (its path secret was wrong) reports stuck with reason
// path and repairs itself by resync, witnessed and confirmed like any
// commit, ending at the group's epoch.
func TestGate07_StuckDeviceRepairedByResync(t *testing.T) {
	eachDB(t, func(t *testing.T, mode string) {
		g := newGate(t, mode)
		alice, bob, carol := g.Member("alice", world.Config{}), g.Member("bob", world.Config{}), g.Member("carol", world.Config{})
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
		done := async(func() error { return carol.C.SyncAll(g.Ctx) })
		if err := g.until(done, alice, bob); err != nil {
			t.Logf("carol: %v", err)
		}
		st := g.notice(alice, id, seq, backendpb.AcceptanceNotice_STUCK)
		if verdicts(st)[carol.C.InboxID()] != "STUCK/path" {
			t.Fatalf("carol's stuck report: %v", verdicts(st))
		}
		g.honest(id, []string{h.C.InboxID()}, alice, bob, carol)
		if got := carol.Info(id); got.Epoch != stuck.Epoch+2 {
			t.Fatalf("carol at epoch %d, stuck at %d: want the confirmed commit and her resync", got.Epoch, stuck.Epoch)
		}
	})
}
