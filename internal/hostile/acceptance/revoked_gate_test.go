package acceptance_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// revokeLocally has m's inbox revoke the installation key in m's store
// only: the delivery service's device list stays stale (a backup older
// than the revocation, a list withheld), as ADR-0030's amendment assumes.
func (g *gate) revokeLocally(m *world.Member, key []byte) {
	g.t.Helper()
	u, err := identity.NewRevoke(m.C.Identity().RecoveryKey, key, time.Now().UnixNano())
	if err != nil {
		g.t.Fatal(err)
	}
	raw, err := proto.Marshal(u)
	if err != nil {
		g.t.Fatal(err)
	}
	m.Tx(func(tx ports.Tx) error {
		_, err := tx.IdentityCache().Put(g.Ctx, ports.IdentityUpdateRecord{InboxID: m.C.InboxID(), SequenceID: 1 << 40, Update: raw})
		return err
	})
}

// TestGate13_RevokedDeviceJoinBlockedNotTheUser: ADR-0030 amendment rule
// 2 (COMP-500 to COMP-503, COMP-508). bob (not a super admin) revoked his
// phone; the service's list does not know it. The phone's resync pends;
// bob's own installation refuses it with reason credential: the join is
// dropped, only the phone is blocked (its messages refused), bob's inbox
// is not quarantined, and bob commits the phone's removal, which ends the
// block. Every honest member then holds the same epoch, authenticator
// and members, no quarantine, and does not read forked.
func TestGate13_RevokedDeviceJoinBlockedNotTheUser(t *testing.T) {
	eachDB(t, func(t *testing.T, mode string) {
		// alice's and carol's OKs start the grace period; bob's refusal
		// must land within it, and bob syncs first.
		g := newGate(t, mode, "-grace-period", raceGrace.String())
		alice := g.Member("alice", world.Config{})
		bob := g.Member("bob", world.Config{})
		phone := g.Member("phone", world.Config{RecoveryKey: bob.C.Identity().RecoveryKey})
		carol := g.Member("carol", world.Config{})
		id := g.group(alice, []*world.Member{bob, carol}, nil)
		world.SyncAll(alice, bob, carol, phone)
		g.revokeLocally(bob, phone.C.InstallationKey())
		e0 := epoch(alice, id)

		done := async(func() error { _, err := phone.Conv(id).Resync(g.Ctx); return err })
		err := g.until(done, bob, alice, carol)
		t.Logf("the phone's resync: %v", err)
		n := g.notice(alice, id, 0, backendpb.AcceptanceNotice_BLOCKED)
		if !bytes.Equal(n.GetInstallationKey(), phone.C.InstallationKey()) || string(n.GetInboxId()) != bob.C.InboxID() {
			t.Fatalf("BLOCKED notice %v", n)
		}
		if d := g.notice(alice, id, n.GetCommitSequenceId(), backendpb.AcceptanceNotice_DROPPED); verdicts(d)[bob.C.InboxID()] != "REFUSED/credential" {
			t.Fatalf("the drop's reports %v", verdicts(d))
		}
		if hasNotice(g, alice, id, n.GetCommitSequenceId(), backendpb.AcceptanceNotice_QUARANTINED) {
			t.Fatal("bob's inbox quarantined: the victim's")
		}
		world.SyncAll(alice, bob, carol)
		if epoch(alice, id) != e0 {
			t.Fatalf("the dropped join moved the epoch %d → %d", e0, epoch(alice, id))
		}
		if _, err := phone.Conv(id).Send(g.Ctx, []byte("still here")); !errors.Is(err, ports.ErrBlocked) {
			t.Fatalf("the blocked phone's message: %v, want ErrBlocked", err)
		}
		if _, err := bob.Conv(id).Send(g.Ctx, []byte("hi")); err != nil {
			t.Fatalf("bob's message: %v", err)
		}
		done = async(func() error { return bob.Conv(id).RemoveInstallations(g.Ctx, phone.C.InstallationKey()) })
		if err := g.until(done, alice, carol); err != nil {
			t.Fatalf("bob removes his revoked phone: %v", err)
		}
		g.honest(id, nil, alice, bob, carol)
		ms, err := alice.Conv(id).Members(g.Ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if bytes.Equal(m.InstallationKey, phone.C.InstallationKey()) {
				t.Fatal("the phone is still a member")
			}
		}
		if epoch(alice, id) != e0+1 {
			t.Fatalf("epoch %d after the removal, want %d", epoch(alice, id), e0+1)
		}
	})
}

// TestGate14_OwnersJoinWaitsForOwnDevices: ADR-0030 amendment rule 3
// (COMP-504 to COMP-506), with -owner-join-limit 1.5s. dana, a super
// admin, revoked her laptop (her store only): the laptop's resync waits
// and dana's refusal drops it before the limit, blocking the laptop.
// frank's laptop resyncs while frank is offline: it takes effect when
// the limit ends; with frank online it takes effect after the grace
// period (both times logged: the limit's cost). erin, whose only
// installation was lost, recovers at once. Every honest member then
// agrees.
func TestGate14_OwnersJoinWaitsForOwnDevices(t *testing.T) {
	eachDB(t, func(t *testing.T, mode string) {
		const limit = 1500 * time.Millisecond
		g := newGate(t, mode, "-owner-join-limit", limit.String())
		bob := g.Member("bob", world.Config{})
		carol := g.Member("carol", world.Config{})

		// Refused by another of the super admin's installations.
		dana := g.Member("dana", world.Config{})
		laptop := g.Member("danalaptop", world.Config{RecoveryKey: dana.C.Identity().RecoveryKey})
		id := g.group(dana, []*world.Member{bob, carol}, nil)
		world.SyncAll(dana, laptop, bob, carol)
		g.revokeLocally(dana, laptop.C.InstallationKey())
		e0 := epoch(bob, id)
		start := time.Now()
		done := async(func() error { _, err := laptop.Conv(id).Resync(g.Ctx); return err })
		t.Logf("dana's laptop's resync: %v", g.until(done, dana, bob, carol))
		n := g.notice(bob, id, 0, backendpb.AcceptanceNotice_BLOCKED)
		if time.Since(start) >= limit {
			t.Logf("the refusal came after the limit (%v): the join could have taken effect", time.Since(start))
		}
		if !bytes.Equal(n.GetInstallationKey(), laptop.C.InstallationKey()) {
			t.Fatalf("BLOCKED notice %v", n)
		}
		if hasNotice(g, bob, id, n.GetCommitSequenceId(), backendpb.AcceptanceNotice_CONFIRMED) {
			t.Fatal("the refused resync was confirmed")
		}
		g.honest(id, nil, dana, bob, carol)
		if epoch(bob, id) != e0 {
			t.Fatalf("the dropped resync moved the epoch %d → %d", e0, epoch(bob, id))
		}

		// frank's other installation does not answer: in effect at the limit.
		frank := g.Member("frank", world.Config{})
		flaptop := g.Member("franklaptop", world.Config{RecoveryKey: frank.C.Identity().RecoveryKey})
		resync := func(online bool) time.Duration {
			id := g.group(frank, []*world.Member{bob, carol}, nil)
			world.SyncAll(frank, flaptop, bob, carol)
			e0 := epoch(bob, id)
			start := time.Now()
			done := async(func() error { _, err := flaptop.Conv(id).Resync(g.Ctx); return err })
			ms := []*world.Member{bob, carol}
			if online {
				ms = append(ms, frank)
			}
			if err := g.until(done, ms...); err != nil {
				t.Fatalf("frank's laptop's resync (frank online %v): %v", online, err)
			}
			took := time.Since(start)
			g.notice(bob, id, 0, backendpb.AcceptanceNotice_CONFIRMED)
			g.honest(id, nil, frank, flaptop, bob, carol)
			if epoch(bob, id) != e0+1 {
				t.Fatalf("epoch %d after the resync, want %d", epoch(bob, id), e0+1)
			}
			return took
		}
		offline := resync(false)
		online := resync(true)
		t.Logf("a super admin's resync took effect after %v with her other installation offline (limit %v), %v online (grace period 200ms)", offline, limit, online)

		// erin lost her only installation: her recovery takes effect at once.
		erin := g.Member("erin", world.Config{})
		id = g.group(erin, []*world.Member{bob, carol}, nil)
		e0 = epoch(bob, id)
		erin.Close()
		fresh := g.Member("erinnew", world.Config{RecoveryKey: erin.C.Identity().RecoveryKey})
		start = time.Now()
		if _, err := fresh.C.RecoverGroup(g.Ctx, id); err != nil {
			t.Fatal(err)
		}
		t.Logf("erin's recovery took effect after %v", time.Since(start))
		es, err := bob.Transport.Query(g.Ctx, append([]byte{byte(ports.TopicGroupMessages)}, id...), 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if n := e.GetEnvelope().GetAcceptanceNotice(); n != nil {
				t.Fatalf("erin's recovery went through two phases: %v", n)
			}
		}
		g.honest(id, nil, fresh, bob, carol)
		if epoch(bob, id) != e0+1 {
			t.Fatalf("epoch %d after the recovery, want %d", epoch(bob, id), e0+1)
		}
	})
}
