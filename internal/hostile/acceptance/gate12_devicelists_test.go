package acceptance_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/internal/testenv"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// TestGate12_DeviceListsFirstAfterRestore: ADR-0030 amendment rule 1
// (COMP-509 to COMP-514) against a regroupd process backed up and
// restored as docs/operations.md says. alice, the super admin, has a
// laptop with a leaf in the group and a tablet without one. After the
// backup alice commits and revokes both; the restore loses the
// revocation. alice reconnects and commits: refused for catch-up, her
// client uploads her device list, then her merged commit, then commits
// again — the list lands before the commits. Then (a) the laptop's
// commit, (b) its resync and (c) the tablet's recovery join are each
// refused as revoked, although the service's restored list still names
// both and the laptop is a super admin's installation. Every honest
// member ends at the same epoch, authenticator and members.
func TestGate12_DeviceListsFirstAfterRestore(t *testing.T) {
	eachDB(t, func(t *testing.T, mode string) {
		g := newGate(t, mode, "-catch-up-window", "2m")
		kit := testenv.NewBackupKit(t, mode, g.Regroupd)
		alice := g.Member("alice", world.Config{})
		laptop := g.Member("alicelaptop", world.Config{RecoveryKey: alice.C.Identity().RecoveryKey})
		bob, carol := g.Member("bob", world.Config{}), g.Member("carol", world.Config{})
		id := g.group(alice, []*world.Member{bob, carol}, nil)
		tablet := g.Member("alicetablet", world.Config{RecoveryKey: alice.C.Identity().RecoveryKey})
		honest := []*world.Member{alice, bob, carol}
		world.SyncAll(append(honest, laptop)...)
		if _, ok := leafOf(t, alice, id, laptop.C.InstallationKey()); !ok {
			t.Fatal("the laptop has no leaf in alice's group")
		}
		kit.Backup()
		restored := epoch(alice, id)

		// After the backup: alice's commit, merged by all, and her
		// revocation of laptop and tablet, which her client reads.
		if err := alice.Conv(id).SetName(g.Ctx, "after the backup"); err != nil {
			t.Fatal(err)
		}
		world.SyncAll(append(honest, laptop)...)
		opts := identity.Options{Store: alice.Store, Transport: alice.Transport, Clock: alice.Clock}
		for _, k := range [][]byte{laptop.C.InstallationKey(), tablet.C.InstallationKey()} {
			if _, err := identity.Revoke(g.Ctx, opts, alice.C.Identity().RecoveryKey, k); err != nil {
				t.Fatal(err)
			}
		}
		r, err := identity.NewResolver(identity.ResolverOptions{Store: alice.Store, Transport: alice.Transport, Clock: alice.Clock})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Sync(g.Ctx, alice.C.InboxID()); err != nil {
			t.Fatal(err)
		}

		kit.PutBack(true)
		world.WaitServing(t, alice)
		if n := revokes(t, alice); n != 0 {
			t.Fatalf("the restored service holds %d revocations of alice's; the backup was older", n)
		}
		restoredTop, err := alice.Transport.HighestSequenceID(g.Ctx, append([]byte{byte(ports.TopicGroupMessages)}, id...))
		if err != nil {
			t.Fatal(err)
		}
		// alice's commit is for an epoch past the restored chain: refused
		// for catch-up, her client uploads her list and her merged
		// commit, then the commit is taken.
		if err := alice.Conv(id).SetName(g.Ctx, "decided"); err != nil {
			t.Fatalf("alice's commit after the restore: %v", err)
		}
		if got := epoch(alice, id); got != restored+2 {
			t.Fatalf("alice at epoch %d, want %d", got, restored+2)
		}
		if n := revokes(t, alice); n != 2 {
			t.Fatalf("the service holds %d revocations of alice's after her upload, want 2", n)
		}
		lastRevoke, firstCommit := listAndCommitOrder(t, alice, id, restoredTop)
		if firstCommit == 0 || lastRevoke > firstCommit {
			t.Fatalf("alice's device list at id %d, her first commit after the restore at %d: the list must come first", lastRevoke, firstCommit)
		}

		// (a) the laptop's commit, (b) its resync, (c) the tablet's
		// recovery join: each refused as revoked.
		world.WaitServing(t, laptop)
		ctx, cancel := context.WithTimeout(g.Ctx, 30*time.Second)
		defer cancel()
		revoked(t, "the laptop's commit", laptop.Conv(id).UpdateKeys(ctx))
		_, err = laptop.Conv(id).Resync(ctx)
		revoked(t, "the laptop's resync", err)
		_, err = tablet.C.RecoverGroup(ctx, id)
		revoked(t, "the tablet's recovery join", err)

		world.WaitServing(t, bob)
		world.WaitServing(t, carol)
		g.honest(id, nil, honest...)
		if got := epoch(bob, id); got != restored+2 {
			t.Fatalf("bob at epoch %d after the refusals, want %d", got, restored+2)
		}
		if _, ok := leafOf(t, bob, id, tablet.C.InstallationKey()); ok {
			t.Fatal("the tablet has a leaf")
		}
		if name := alice.Info(id).Name; name != "decided" {
			t.Fatalf("alice holds the name %q", name)
		}
	})
}

// revoked fails unless err is the service's refusal of a revoked
// installation's commit.
func revoked(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ports.ErrInvalidArgument) || !strings.Contains(err.Error(), "revoked by inbox") {
		t.Fatalf("%s: %v; want a refusal as revoked (ErrInvalidArgument)", what, err)
	}
}

// revokes counts the revocations on m's inbox's identity topic.
func revokes(t *testing.T, m *world.Member) int {
	t.Helper()
	n := 0
	for _, e := range identityEnvelopes(t, m) {
		if e.GetEnvelope().GetIdentityUpdate().GetRevokeInstallation() != nil {
			n++
		}
	}
	return n
}

func identityEnvelopes(t *testing.T, m *world.Member) []*backendpb.OriginatorEnvelope {
	t.Helper()
	topic, err := identity.Topic(m.C.InboxID())
	if err != nil {
		t.Fatal(err)
	}
	es, err := m.Transport.Query(m.W.Ctx, topic, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// listAndCommitOrder returns the highest sequence id of a revocation on
// m's identity topic and the lowest of a commit on the group's topic
// above after: the order of an upload after the restore.
func listAndCommitOrder(t *testing.T, m *world.Member, id []byte, after uint64) (lastRevoke, firstCommit uint64) {
	t.Helper()
	for _, e := range identityEnvelopes(t, m) {
		if e.GetEnvelope().GetIdentityUpdate().GetRevokeInstallation() != nil {
			lastRevoke = max(lastRevoke, e.GetSequenceId())
		}
	}
	es, err := m.Transport.Query(m.W.Ctx, append([]byte{byte(ports.TopicGroupMessages)}, id...), after, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		// A commit travels as a PublicMessage: version 1, wire format 1.
		if msg := e.GetEnvelope().GetGroupMessage(); len(msg) > 4 && msg[3] == 1 {
			return lastRevoke, e.GetSequenceId()
		}
	}
	return lastRevoke, 0
}

// leafOf reports m's view of the installation's leaf in the group.
func leafOf(t *testing.T, m *world.Member, id, key []byte) (uint32, bool) {
	t.Helper()
	ms, err := m.Conv(id).Members(m.W.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ms {
		if string(x.InstallationKey) == string(key) {
			return x.LeafIndex, true
		}
	}
	return 0, false
}
