package delivery_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// ADR-0030 Decision 1, COMP-410: a super admin's commit takes effect at
// once (not pending, the state advances); a member's commit pends (the
// state stays, the commit and its GroupInfo are stored marked pending).
func ruleADR0030D1_SuperAdminAtOnceOthersPend(t *testing.T, p *twoPhase) {
	alice, bob, _, id := p.group()
	e0 := p.epoch(id)
	c, gi := p.commit(alice, id, ports.CommitOptions{})
	ids := p.publish(alice, id, c, gi)
	if _, ok := p.pending(id); ok || p.epoch(id) != e0+1 {
		t.Fatalf("a super admin's commit pends (epoch %d → %d)", e0, p.epoch(id))
	}
	if es := p.topicEnvelopes(alice, ports.TopicGroupMessages, id, ids[0]-1); es[0].GetPending() {
		t.Fatal("a super admin's commit is marked pending")
	}
	// alice's engine cleared its commit: let it and the others catch up.
	alice.Sync()
	bob.Sync()
	seq := p.stage(bob, id)
	if p.epoch(id) != e0+1 {
		t.Fatalf("a member's commit advanced the state to epoch %d", p.epoch(id))
	}
	es := p.topicEnvelopes(alice, ports.TopicGroupMessages, id, seq-1)
	if len(es) == 0 || es[0].GetSequenceId() != seq || !es[0].GetPending() {
		t.Fatal("the member's commit is not served marked pending")
	}
	gis := p.topicEnvelopes(alice, ports.TopicGroupInfo, id, 0)
	if last := gis[len(gis)-1]; !last.GetPending() {
		t.Fatal("the pending commit's GroupInfo is not marked pending")
	}
	if p.count("pending") != 1 {
		t.Fatalf("pending events = %d", p.count("pending"))
	}
}

// ADR-0030 Decision 2, COMP-411: while a commit pends, the newest
// GroupInfo served is the current epoch's; messages of the current epoch
// pass and those of the pending epoch are refused with ErrCommitPending;
// another member's commit is refused with ErrCommitPending; the pending
// commit published again is answered with its id.
func ruleADR0030D2_WhilePending(t *testing.T, p *twoPhase) {
	alice, bob, carol, id := p.group()
	e0 := p.epoch(id)
	c, gi := p.commit(bob, id, ports.CommitOptions{})
	ids := p.publish(bob, id, c, gi)
	seq := ids[0]
	newest, err := alice.Transport.QueryNewest(p.Ctx, p.topic(ports.TopicGroupInfo, id))
	if err != nil || newest.GetPending() || newest.GetSequenceId() == ids[1] {
		t.Fatalf("newest GroupInfo while pending = %v, %v: want the current epoch's", newest.GetSequenceId(), err)
	}
	if _, err := p.tryPublish(carol, id, p.message(carol, id, 0)); err != nil {
		t.Fatalf("a message of the current epoch: %v", err)
	}
	if _, err := p.tryPublish(carol, id, p.message(carol, id, e0+1)); !errors.Is(err, ports.ErrCommitPending) {
		t.Fatalf("a message of the pending epoch: %v, want ErrCommitPending", err)
	}
	c2, gi2 := p.commit(carol, id, ports.CommitOptions{})
	if _, err := p.tryPublish(carol, id, c2, gi2); !errors.Is(err, ports.ErrCommitPending) || errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("another member's commit while one pends: %v, want ErrCommitPending", err)
	}
	again := p.publish(bob, id, c, gi)
	if !slices.Equal(again, ids) {
		t.Fatalf("the pending commit published again = %v, want %v", again, ids)
	}
	if pc, _ := p.pending(id); pc.CommitSeq != seq {
		t.Fatal("the pending commit changed")
	}
	if !slices.Contains(p.obs.refused, "commit_pending") {
		t.Fatalf("refusals observed %v", p.obs.refused)
	}
}

// ADR-0030 Decision 2, COMP-411: a super admin's commit of the current
// epoch while another pends is accepted and supersedes it: a SUPERSEDED
// notice below the commit, the pending state and GroupInfo gone, nobody
// quarantined.
func ruleADR0030D2_SuperAdminSupersedes(t *testing.T, p *twoPhase) {
	alice, bob, _, id := p.group()
	e0 := p.epoch(id)
	pend := p.stage(bob, id)
	c, gi := p.commit(alice, id, ports.CommitOptions{})
	ids := p.publish(alice, id, c, gi)
	if _, ok := p.pending(id); ok || p.epoch(id) != e0+1 {
		t.Fatal("the pending commit survived a super admin's commit")
	}
	es := p.topicEnvelopes(alice, ports.TopicGroupMessages, id, pend)
	if len(es) < 2 || es[0].GetEnvelope().GetAcceptanceNotice().GetOutcome() != backendpb.AcceptanceNotice_SUPERSEDED ||
		es[0].GetEnvelope().GetAcceptanceNotice().GetCommitSequenceId() != pend || es[1].GetSequenceId() != ids[0] {
		t.Fatalf("the topic after the pending commit: %v", es)
	}
	for _, g := range p.topicEnvelopes(alice, ports.TopicGroupInfo, id, 0) {
		if g.GetPending() {
			t.Fatal("the superseded commit's GroupInfo is still stored")
		}
	}
	if q := p.quarantined(id); len(q) != 0 || p.count("superseded") != 1 {
		t.Fatalf("quarantined %v, superseded %d", q, p.count("superseded"))
	}
}

// ADR-0030 Decision 3, COMP-412: the committer's own installation, and
// an installation not in the group, are no witnesses; a witness's first
// report is kept and a second ignored; a report on another commit than
// the pending one is not found.
func ruleADR0030D3_Witnesses(t *testing.T, p *twoPhase) {
	alice, bob, carol, id := p.group()
	outsider := p.Member("dave", world.Config{})
	seq := p.stage(bob, id)
	if err := p.report(bob, id, seq, ports.VerdictOK, ""); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("the committer's report: %v", err)
	}
	if err := p.report(outsider, id, seq, ports.VerdictRefused, ports.ReportTag); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("an outsider's report: %v", err)
	}
	if err := p.report(alice, id, seq+1000, ports.VerdictOK, ""); !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("a report on another commit: %v", err)
	}
	if err := p.report(alice, id, seq, ports.VerdictOK, "tag"); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("an OK with a reason: %v", err)
	}
	if err := p.report(alice, id, seq, ports.VerdictOK, ""); err != nil {
		t.Fatal(err)
	}
	// alice's second report, a refusal, is ignored: the first is kept.
	if err := p.report(alice, id, seq, ports.VerdictRefused, ports.ReportPath); err != nil {
		t.Fatal(err)
	}
	if err := p.report(carol, id, seq, ports.VerdictOK, ""); err != nil {
		t.Fatal(err)
	}
	rs, err := p.store.Reports(p.Ctx, id, seq)
	if err != nil || len(rs) != 2 || rs[0].Verdict != ports.VerdictOK || rs[1].Verdict != ports.VerdictOK {
		t.Fatalf("reports kept = %+v, %v", rs, err)
	}
	if rs[0].InboxID == rs[1].InboxID || !(rs[0].InboxID == alice.C.InboxID() || rs[1].InboxID == alice.C.InboxID()) {
		t.Fatalf("reports' inboxes %q %q", rs[0].InboxID, rs[1].InboxID)
	}
	if _, ok := p.pending(id); !ok {
		t.Fatal("an OK decided before the grace period ended")
	}
}

// ADR-0030 Decisions 4 and 5, COMP-413, COMP-414: the first OK starts
// the grace period; before its end nothing is decided, at its end the
// commit is confirmed: CONFIRMED on the topic, the pending state current,
// the old one kept as previous, its GroupInfo the topic's newest.
func ruleADR0030D4_ConfirmedAtGraceEnd(t *testing.T, p *twoPhase) {
	alice, bob, _, id := p.group()
	e0 := p.epoch(id)
	c, gi := p.commit(bob, id, ports.CommitOptions{})
	ids := p.publish(bob, id, c, gi)
	p.decide(testGrace * 2) // no report: the grace period has not started
	if _, ok := p.pending(id); !ok {
		t.Fatal("decided without a report")
	}
	if err := p.report(alice, id, ids[0], ports.VerdictOK, ""); err != nil {
		t.Fatal(err)
	}
	p.decide(testGrace - 1)
	if _, ok := p.pending(id); !ok {
		t.Fatal("confirmed before the grace period ended")
	}
	p.decide(1)
	if _, ok := p.pending(id); ok || p.epoch(id) != e0+1 {
		t.Fatalf("not confirmed at the grace period's end (epoch %d)", p.epoch(id))
	}
	prev, err := p.store.PreviousState(p.Ctx, id)
	if err != nil || prev.Epoch != e0 {
		t.Fatalf("previous state = %v, %v", prev.Epoch, err)
	}
	ns := p.notices(alice, id, ids[0])
	if len(ns) != 1 || ns[0].GetOutcome() != backendpb.AcceptanceNotice_CONFIRMED || ns[0].GetCommitSequenceId() != ids[0] ||
		len(ns[0].GetReports()) != 1 || !bytes.Equal(ns[0].GetInboxId(), []byte(bob.C.InboxID())) {
		t.Fatalf("notices = %v", ns)
	}
	newest, err := alice.Transport.QueryNewest(p.Ctx, p.topic(ports.TopicGroupInfo, id))
	if err != nil || newest.GetSequenceId() != ids[1] || newest.GetPending() {
		t.Fatalf("newest GroupInfo = %d (pending %v), %v; want %d", newest.GetSequenceId(), newest.GetPending(), err, ids[1])
	}
	if p.count("confirmed") < 1 { // other groups' commits may fall due too
		t.Fatal("no confirmation observed")
	}
}

// ADR-0030 Decisions 4 and 5, COMP-413, COMP-416: a single refusal,
// against an earlier OK, drops the commit at once: DROPPED then
// QUARANTINED on the topic, the pending GroupInfo deleted, the
// committer's inbox quarantined: its next commit refused with
// ErrQuarantined, its messages accepted. A member cannot lift it; a super
// admin can (LIFTED), and the inbox commits again.
func ruleADR0030D4_RefusalDropsAndQuarantines(t *testing.T, p *twoPhase) {
	alice, bob, carol, id := p.group()
	e0 := p.epoch(id)
	seq := p.stage(bob, id)
	if err := p.report(alice, id, seq, ports.VerdictOK, ""); err != nil {
		t.Fatal(err)
	}
	if err := p.report(carol, id, seq, ports.VerdictRefused, ports.ReportPath); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.pending(id); ok || p.epoch(id) != e0 {
		t.Fatal("a refusal did not drop the commit at once")
	}
	ns := p.notices(alice, id, seq)
	if got := outcomes(ns); !slices.Equal(got, []backendpb.AcceptanceNotice_Outcome{backendpb.AcceptanceNotice_DROPPED, backendpb.AcceptanceNotice_QUARANTINED}) {
		t.Fatalf("notices %v", got)
	}
	if len(ns[0].GetReports()) != 2 || !bytes.Equal(ns[1].GetInboxId(), []byte(bob.C.InboxID())) {
		t.Fatalf("drop notice %v", ns)
	}
	for _, g := range p.topicEnvelopes(alice, ports.TopicGroupInfo, id, 0) {
		if g.GetPending() {
			t.Fatal("the dropped commit's GroupInfo is still stored")
		}
	}
	if q := p.quarantined(id); !slices.Equal(q, []string{bob.C.InboxID()}) {
		t.Fatalf("quarantined %v", q)
	}
	c, gi := p.commit(bob, id, ports.CommitOptions{})
	if _, err := p.tryPublish(bob, id, c, gi); !errors.Is(err, ports.ErrQuarantined) {
		t.Fatalf("a quarantined inbox's commit: %v, want ErrQuarantined", err)
	}
	if _, err := p.tryPublish(bob, id, p.message(bob, id, 0)); err != nil {
		t.Fatalf("a quarantined inbox's message: %v", err)
	}
	lift := ports.Lift{GroupID: id, InboxID: []byte(bob.C.InboxID())}
	if err := p.witness(carol).Lift(p.Ctx, lift); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("a member's lift: %v", err)
	}
	if err := p.witness(alice).Lift(p.Ctx, lift); err != nil {
		t.Fatal(err)
	}
	if q := p.quarantined(id); len(q) != 0 {
		t.Fatalf("quarantined after the lift %v", q)
	}
	if got := outcomes(p.notices(alice, id, seq)); got[len(got)-1] != backendpb.AcceptanceNotice_LIFTED {
		t.Fatalf("notices %v", got)
	}
	p.stage(bob, id)
	if p.count("dropped") != 1 || p.count("quarantined") != 1 || p.count("lifted") != 1 {
		t.Fatalf("events %v", p.obs.accepted)
	}
}

// ADR-0030 Decision 4, COMP-415: a commit without a report expires
// after the expiry, nobody quarantined; its committer commits again.
func ruleADR0030D4_Expires(t *testing.T, p *twoPhase) {
	alice, bob, _, id := p.group()
	seq := p.stage(bob, id)
	p.decide(testExpiry - 1)
	if _, ok := p.pending(id); !ok {
		t.Fatal("expired early")
	}
	p.decide(1)
	if _, ok := p.pending(id); ok {
		t.Fatal("not expired")
	}
	if got := outcomes(p.notices(alice, id, seq)); !slices.Equal(got, []backendpb.AcceptanceNotice_Outcome{backendpb.AcceptanceNotice_EXPIRED}) {
		t.Fatalf("notices %v", got)
	}
	if q := p.quarantined(id); len(q) != 0 {
		t.Fatalf("quarantined %v", q)
	}
	p.stage(bob, id)
}
