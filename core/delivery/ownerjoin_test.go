package delivery_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// testOwnerJoinLimit is the harness's OwnerJoinLimit.
const testOwnerJoinLimit = 10 * time.Minute

// ADR-0030 amendment 2026-10-26 rule 3, COMP-504 to COMP-507: dana, a
// super admin, has a second installation (laptop) in her groups.
// laptop's resync waits: another inbox's OK does not count, dana's own
// refusal with reason credential drops it and blocks laptop, dana's
// inbox not quarantined. In a second group nobody of dana's reports:
// the resync is still pending after the grace period and the expiry's
// start, and takes effect when the limit ends. erin, a super admin whose
// only installation was lost, recovers her group at once.
func ruleADR0030A3_OwnerJoinWaits(t *testing.T, p *twoPhase) {
	sfx := t.Name()[len(t.Name())-4:]
	dana := p.Member("dana"+sfx, world.Config{})
	laptop := p.Member("danalaptop"+sfx, world.Config{RecoveryKey: dana.C.Identity().RecoveryKey})
	bob, carol := p.bob, p.carol

	// Refused by dana's own installation before the limit.
	id := p.groupBy(dana, laptop, bob, carol)
	e0 := p.epoch(id)
	seq := p.resyncPending(laptop, id)
	if err := p.report(bob, id, seq, ports.VerdictOK, ""); err != nil {
		t.Fatal(err)
	}
	p.decide(testGrace)
	if _, ok := p.pending(id); !ok {
		t.Fatal("another inbox's OK confirmed a super admin's join that waits for her own installations")
	}
	if err := p.report(dana, id, seq, ports.VerdictRefused, ports.ReportCredential); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.pending(id); ok || p.epoch(id) != e0 {
		t.Fatal("dana's refusal did not drop laptop's resync")
	}
	if got := outcomes(p.notices(bob, id, seq)); !slices.Equal(got, []backendpb.AcceptanceNotice_Outcome{backendpb.AcceptanceNotice_DROPPED, backendpb.AcceptanceNotice_BLOCKED}) {
		t.Fatalf("notices %v", got)
	}
	if b := p.blocked(id); len(b) != 1 || !bytes.Equal(b[0], laptop.C.InstallationKey()) {
		t.Fatalf("blocked %x", b)
	}
	if q := p.quarantined(id); len(q) != 0 {
		t.Fatalf("quarantined %v", q)
	}
	// A super admin lifts the block (COMP-503): LIFTED names laptop.
	lift := ports.Lift{GroupID: id, InstallationKey: laptop.C.InstallationKey()}
	if err := p.witness(bob).Lift(p.Ctx, lift); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("a member's lift of a block: %v", err)
	}
	if err := p.witness(dana).Lift(p.Ctx, ports.Lift{GroupID: id, InstallationKey: bob.C.InstallationKey()}); !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("the lift of an installation not blocked: %v", err)
	}
	if err := p.witness(dana).Lift(p.Ctx, lift); err != nil {
		t.Fatal(err)
	}
	ns := p.notices(bob, id, seq)
	if last := ns[len(ns)-1]; last.GetOutcome() != backendpb.AcceptanceNotice_LIFTED || !bytes.Equal(last.GetInstallationKey(), laptop.C.InstallationKey()) {
		t.Fatalf("last notice %v", last)
	}
	if b := p.blocked(id); len(b) != 0 {
		t.Fatalf("blocked after the lift %x", b)
	}

	// Nobody of dana's answers: in effect when the limit ends.
	id = p.groupBy(dana, laptop, bob, carol)
	e0 = p.epoch(id)
	seq = p.resyncPending(laptop, id)
	if err := p.report(carol, id, seq, ports.VerdictOK, ""); err != nil {
		t.Fatal(err)
	}
	p.decide(testOwnerJoinLimit - time.Second)
	if _, ok := p.pending(id); !ok {
		t.Fatal("the join took effect before the limit")
	}
	p.decide(time.Second)
	if _, ok := p.pending(id); ok || p.epoch(id) != e0+1 {
		t.Fatalf("the join did not take effect at the limit (epoch %d, from %d)", p.epoch(id), e0)
	}
	if got := outcomes(p.notices(bob, id, seq)); !slices.Equal(got, []backendpb.AcceptanceNotice_Outcome{backendpb.AcceptanceNotice_CONFIRMED}) {
		t.Fatalf("notices %v", got)
	}

	// erin lost her only installation: her recovery takes effect at once.
	erin := p.Member("erin"+sfx, world.Config{})
	id = p.groupBy(erin, bob, carol)
	e0 = p.epoch(id)
	fresh := p.Member("erinnew"+sfx, world.Config{RecoveryKey: erin.C.Identity().RecoveryKey})
	ctx, cancel := context.WithTimeout(p.Ctx, 20*time.Second)
	defer cancel()
	if _, err := fresh.C.RecoverGroup(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.pending(id); ok || p.epoch(id) != e0+1 {
		t.Fatalf("erin's recovery after losing every installation did not take effect at once (epoch %d, from %d)", p.epoch(id), e0)
	}
}
