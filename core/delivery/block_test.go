package delivery_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// groupWithPhone makes alice's group with bob, carol and phone, a second
// installation of bob's inbox.
func (p *twoPhase) groupWithPhone() (phone *world.Member, id []byte) {
	p.t.Helper()
	phone = p.Member("bobphone"+p.t.Name()[len(p.t.Name())-4:], world.Config{RecoveryKey: p.bob.C.Identity().RecoveryKey})
	return phone, p.groupBy(p.alice, p.bob, p.carol, phone)
}

// groupBy makes owner's registered group (owner a super admin) with the
// inboxes of others, every member consenting.
func (p *twoPhase) groupBy(owner *world.Member, others ...*world.Member) []byte {
	p.t.Helper()
	var inboxes []string
	for _, m := range others {
		if m.C.InboxID() != owner.C.InboxID() && !slices.Contains(inboxes, m.C.InboxID()) {
			inboxes = append(inboxes, m.C.InboxID())
		}
	}
	g, err := owner.C.CreateGroup(p.Ctx, client.GroupOptions{Name: "g", Members: inboxes})
	if err != nil {
		p.t.Fatal(err)
	}
	id := g.ID()
	if _, err := p.store.PublicState(p.Ctx, id); errors.Is(err, ports.ErrNotFound) {
		p.publish(owner, id, p.groupInfo(owner, id))
	}
	all := append([]*world.Member{owner}, others...)
	world.SyncAll(all...)
	for _, m := range all {
		if err := m.Conv(id).SetConsent(p.Ctx, ports.ConsentAllowed); err != nil {
			p.t.Fatal(err)
		}
	}
	return id
}

// resyncPending has m resync the group; its external commit pends. It
// returns the commit's sequence id. The client's Resync waits for the
// decision, which the fake clock holds back: it is cancelled once the
// commit pends.
func (p *twoPhase) resyncPending(m *world.Member, id []byte) uint64 {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.Ctx, 20*time.Second)
	done := make(chan error, 1)
	go func() { _, err := m.Conv(id).Resync(ctx); done <- err }()
	defer func() { cancel(); <-done }()
	for {
		pc, ok := p.pending(id)
		if ok && pc.External && pc.Committer == m.C.InboxID() {
			return pc.CommitSeq
		}
		select {
		case err := <-done:
			done <- err
			p.t.Fatalf("%s's resync is not the pending commit (%+v, %v; resync: %v)", m.Name, pc, ok, err)
		case <-ctx.Done():
			p.t.Fatalf("%s's resync did not pend", m.Name)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (p *twoPhase) leafOf(m *world.Member, id, key []byte) uint32 {
	p.t.Helper()
	var leaf uint32
	found := false
	m.Tx(func(tx ports.Tx) error {
		v, err := m.Engine.Group(p.Ctx, tx, id)
		for _, x := range v.Members {
			if bytes.Equal(x.SignatureKey, key) {
				leaf, found = x.LeafIndex, true
			}
		}
		return err
	})
	if !found {
		p.t.Fatalf("%s holds no leaf of %x", m.Name, key[:4])
	}
	return leaf
}

func (p *twoPhase) blocked(id []byte) [][]byte {
	p.t.Helper()
	bs, err := p.svc.Blocked(p.Ctx, id)
	if err != nil {
		p.t.Fatal(err)
	}
	var out [][]byte
	for _, b := range bs {
		out = append(out, b.InstallationKey)
	}
	return out
}

// ADR-0030 amendment 2026-10-26 rule 2, COMP-500 to COMP-503: a
// refusal with reason credential by bob's own installation of the
// resync of bob's other installation (phone) drops it and blocks only
// phone: DROPPED and BLOCKED on the topic, bob's inbox not quarantined,
// phone's messages refused, bob still commits — phone's removal, which
// ends the block; a super admin lifts a block.
func ruleADR0030A2_BlockTheDevice(t *testing.T, p *twoPhase) {
	alice, bob, carol := p.alice, p.bob, p.carol
	phone, id := p.groupWithPhone()
	e0 := p.epoch(id)
	seq := p.resyncPending(phone, id)
	if err := p.report(bob, id, seq, ports.VerdictRefused, ports.ReportCredential); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.pending(id); ok || p.epoch(id) != e0 {
		t.Fatal("the own installation's refusal did not drop the join at once")
	}
	ns := p.notices(alice, id, seq)
	if got := outcomes(ns); !slices.Equal(got, []backendpb.AcceptanceNotice_Outcome{backendpb.AcceptanceNotice_DROPPED, backendpb.AcceptanceNotice_BLOCKED}) {
		t.Fatalf("notices %v", got)
	}
	if !bytes.Equal(ns[1].GetInstallationKey(), phone.C.InstallationKey()) || string(ns[1].GetInboxId()) != bob.C.InboxID() {
		t.Fatalf("BLOCKED notice %v", ns[1])
	}
	if q := p.quarantined(id); len(q) != 0 {
		t.Fatalf("quarantined %v: the victim's inbox", q)
	}
	if b := p.blocked(id); len(b) != 1 || !bytes.Equal(b[0], phone.C.InstallationKey()) {
		t.Fatalf("blocked %x", b)
	}
	if _, err := p.tryPublish(phone, id, p.message(phone, id, 0)); !errors.Is(err, ports.ErrBlocked) {
		t.Fatalf("the blocked installation's message: %v, want ErrBlocked", err)
	}
	if _, err := p.tryPublish(phone, id, p.groupInfo(alice, id)); !errors.Is(err, ports.ErrBlocked) {
		t.Fatalf("the blocked installation's GroupInfo: %v, want ErrBlocked", err)
	}
	if _, err := p.tryPublish(bob, id, p.message(bob, id, 0)); err != nil {
		t.Fatalf("bob's other installation's message: %v", err)
	}
	// bob removes phone: his commit pends, alice confirms it, the block ends.
	c, gi := p.commit(bob, id, ports.CommitOptions{Remove: []uint32{p.leafOf(alice, id, phone.C.InstallationKey())}})
	ids := p.publish(bob, id, c, gi)
	if err := p.report(carol, id, ids[0], ports.VerdictOK, ""); err != nil {
		t.Fatal(err)
	}
	p.decide(testGrace)
	if _, ok := p.pending(id); ok || p.epoch(id) != e0+1 {
		t.Fatalf("bob's removal of phone was not confirmed (epoch %d)", p.epoch(id))
	}
	if b := p.blocked(id); len(b) != 0 {
		t.Fatalf("blocked after the removal %x", b)
	}
	if p.count(delivery.EventBlocked) != 1 || p.count("quarantined") != 0 {
		t.Fatalf("events %v", p.obs.accepted)
	}
}
