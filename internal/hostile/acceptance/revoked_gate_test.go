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
		g := newGate(t, mode)
		alice := g.Member("alice", world.Config{})
		bob := g.Member("bob", world.Config{})
		phone := g.Member("phone", world.Config{RecoveryKey: bob.C.Identity().RecoveryKey})
		carol := g.Member("carol", world.Config{})
		id := g.group(alice, []*world.Member{bob, carol}, nil)
		world.SyncAll(alice, bob, carol, phone)
		g.revokeLocally(bob, phone.C.InstallationKey())
		e0 := epoch(alice, id)

		done := async(func() error { _, err := phone.Conv(id).Resync(g.Ctx); return err })
		err := g.until(done, alice, bob, carol)
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
