package delivery_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/memtransport"
	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// confirm stages m's commit, has w report OK and ends the grace period.
func (p *twoPhase) confirm(m, w *world.Member, id []byte) uint64 {
	p.t.Helper()
	seq := p.stage(m, id)
	if err := p.report(w, id, seq, ports.VerdictOK, ""); err != nil {
		p.t.Fatal(err)
	}
	p.decide(testGrace)
	if _, ok := p.pending(id); ok {
		p.t.Fatal("not confirmed")
	}
	return seq
}

// ADR-0030 Decision 6, COMP-417: stuck reports are taken on confirmed
// commits only, from members of other inboxes than the committer's;
// each is told to the group (STUCK); the first with reason tag, path or
// group-info quarantines the committer (QUARANTINED), once; a stuck
// report with another reason quarantines nobody.
func ruleADR0030D6_StuckReports(t *testing.T, p *twoPhase) {
	alice, bob, carol, id := p.group()
	dave, erin := p.Member("dave", world.Config{}), p.Member("erin", world.Config{})
	if err := alice.Conv(id).AddMembers(p.Ctx, dave.C.InboxID(), erin.C.InboxID()); err != nil {
		t.Fatal(err)
	}
	world.SyncAll(bob, carol, dave, erin)
	pend := p.stage(bob, id)
	if err := p.report(carol, id, pend, ports.VerdictStuck, ports.ReportTag); !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("a stuck report on a pending commit: %v", err)
	}
	// carol witnesses it; her later stuck report would be ignored (the
	// first report of each installation is kept).
	if err := p.report(carol, id, pend, ports.VerdictOK, ""); err != nil {
		t.Fatal(err)
	}
	p.decide(testGrace)
	if err := p.report(bob, id, pend, ports.VerdictStuck, ports.ReportTag); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("the committer's stuck report: %v", err)
	}
	if err := p.report(dave, id, pend, ports.VerdictStuck, ports.ReportPolicy); err != nil {
		t.Fatal(err)
	}
	if q := p.quarantined(id); len(q) != 0 {
		t.Fatalf("a stuck report of reason policy quarantined %v", q)
	}
	if err := p.report(dave, id, pend, ports.VerdictStuck, ports.ReportTag); err != nil {
		t.Fatal(err) // dave's second report: ignored, his first is kept
	}
	if q := p.quarantined(id); len(q) != 0 {
		t.Fatalf("a second report of one installation counted: %v", q)
	}
	if err := p.report(alice, id, pend, ports.VerdictStuck, ports.ReportGroupInfo); err != nil {
		t.Fatal(err)
	}
	if q := p.quarantined(id); !slices.Equal(q, []string{bob.C.InboxID()}) {
		t.Fatalf("quarantined %v", q)
	}
	// Lifted, a later stuck report on the same commit does not
	// quarantine again: once per commit.
	if err := p.witness(alice).Lift(p.Ctx, ports.Lift{GroupID: id, InboxID: []byte(bob.C.InboxID())}); err != nil {
		t.Fatal(err)
	}
	if err := p.report(erin, id, pend, ports.VerdictStuck, ports.ReportPath); err != nil {
		t.Fatal(err)
	}
	if q := p.quarantined(id); len(q) != 0 {
		t.Fatalf("quarantined again %v", q)
	}
	got := outcomes(p.notices(alice, id, pend))
	want := []backendpb.AcceptanceNotice_Outcome{backendpb.AcceptanceNotice_CONFIRMED, backendpb.AcceptanceNotice_STUCK,
		backendpb.AcceptanceNotice_STUCK, backendpb.AcceptanceNotice_QUARANTINED, backendpb.AcceptanceNotice_LIFTED,
		backendpb.AcceptanceNotice_STUCK}
	if !slices.Equal(got, want) {
		t.Fatalf("notices %v, want %v", got, want)
	}
	if p.count("stuck") != 3 || p.obs.reports["stuck/group-info"] != 1 {
		t.Fatalf("events %v, reports %v", p.obs.accepted, p.obs.reports)
	}
}

// ADR-0030 Decision 5, COMP-418: a super admin's commit that removes
// every leaf of a quarantined inbox ends its quarantine.
func ruleADR0030D5_RemovalEndsQuarantine(t *testing.T, p *twoPhase) {
	alice, bob, carol, id := p.group()
	seq := p.confirm(bob, alice, id)
	if err := p.report(carol, id, seq, ports.VerdictStuck, ports.ReportPath); err != nil {
		t.Fatal(err)
	}
	if q := p.quarantined(id); len(q) != 1 {
		t.Fatalf("quarantined %v", q)
	}
	if err := alice.Conv(id).RemoveMembers(p.Ctx, bob.C.InboxID()); err != nil {
		t.Fatal(err)
	}
	if q := p.quarantined(id); len(q) != 0 {
		t.Fatalf("quarantined after the removal %v", q)
	}
}

// ADR-0030 Decision 2, COMP-415: a pending commit, its reports and its
// grace period live in the store: a new service on the same database (a
// restart) confirms it when the grace period that began before the
// restart ends.
func ruleADR0030D2_PendingSurvivesRestart(t *testing.T, p *twoPhase) {
	alice, bob, _, id := p.group()
	e0 := p.epoch(id)
	seq := p.stage(bob, id)
	if err := p.report(alice, id, seq, ports.VerdictOK, ""); err != nil {
		t.Fatal(err)
	}
	restarted := p.newService(p.openStore())
	p.clk.Advance(testGrace)
	if _, err := restarted.DecideDue(p.Ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.pending(id); ok || p.epoch(id) != e0+1 {
		t.Fatal("the restarted service did not confirm the pending commit")
	}
}

// ADR-0030 Decision 4, COMP-415: several services sharing one database
// decide a pending commit once: one CONFIRMED notice however many of
// them decide it at the same moment.
func ruleADR0030D4_ReplicasDecideOnce(t *testing.T, p *twoPhase) {
	alice, bob, _, id := p.group()
	seq := p.stage(bob, id)
	if err := p.report(alice, id, seq, ports.VerdictOK, ""); err != nil {
		t.Fatal(err)
	}
	p.clk.Advance(testGrace)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		svc := p.svc
		if i > 0 {
			svc = p.newService(p.openStore())
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = svc.DecideDue(context.Background())
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if got := outcomes(p.notices(alice, id, seq)); !slices.Equal(got, []backendpb.AcceptanceNotice_Outcome{backendpb.AcceptanceNotice_CONFIRMED}) {
		t.Fatalf("notices %v", got)
	}
}

// ADR-0030 Decision 3, COMP-420: reports are kept 30 days after their
// commit's decision: a sweep before then keeps them, one after deletes
// them.
func ruleADR0030D3_ReportsKept30Days(t *testing.T, p *twoPhase) {
	alice, bob, _, id := p.group()
	seq := p.confirm(bob, alice, id)
	p.clk.Advance(30*24*time.Hour - time.Minute)
	if _, err := p.svc.SweepExpired(p.Ctx); err != nil {
		t.Fatal(err)
	}
	if rs, _ := p.store.Reports(p.Ctx, id, seq); len(rs) != 1 {
		t.Fatalf("reports before 30 days: %d", len(rs))
	}
	p.clk.Advance(2 * time.Minute)
	if _, err := p.svc.SweepExpired(p.Ctx); err != nil {
		t.Fatal(err)
	}
	if rs, _ := p.store.Reports(p.Ctx, id, seq); len(rs) != 0 {
		t.Fatalf("reports after 30 days: %d", len(rs))
	}
}

// COMP-417: a client cannot publish an acceptance notice.
func ruleCOMP417_ClientNoticeRefused(t *testing.T, p *twoPhase) {
	alice, _, _, id := p.group()
	_, err := alice.Transport.Publish(p.Ctx, []*backendpb.ClientEnvelope{{TargetTopic: p.topic(ports.TopicGroupMessages, id),
		Payload: &backendpb.ClientEnvelope_AcceptanceNotice{AcceptanceNotice: &backendpb.AcceptanceNotice{Outcome: backendpb.AcceptanceNotice_CONFIRMED}}}})
	if !errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("a client's notice: %v", err)
	}
}

// ADR-0030 Decision 4, COMP-414: with no grace period the first OK
// confirms the commit within its report.
func ruleADR0030D4_NoGraceConfirmsOnFirstOK(t *testing.T, p *twoPhase) {
	alice, bob, _, id := p.group()
	e0 := p.epoch(id)
	seq := p.stage(bob, id)
	svc := delivery.New(p.store, &delivery.Options{Clock: p.clk, Observer: p.obs,
		PublicGroups: mls.NewPublicGroups(&mls.PublicOptions{CacheBytes: -1}),
		TwoPhase:     &delivery.TwoPhaseOptions{GracePeriod: -1, Expiry: testExpiry}})
	w := memtransport.New(svc, &memtransport.Options{InstallationKey: alice.C.InstallationKey()})
	if err := w.Report(p.Ctx, ports.Report{GroupID: id, CommitSeq: seq, Verdict: ports.VerdictOK}); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.pending(id); ok || p.epoch(id) != e0+1 {
		t.Fatal("the first OK did not confirm the commit without a grace period")
	}
}
