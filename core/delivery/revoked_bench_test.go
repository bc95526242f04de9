package delivery_test

import (
	"context"
	"crypto/ed25519"
	"path/filepath"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/adapters/deliverydb"
	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// BenchmarkCOMP512_RevokedCheck measures, on SQLite, what the device-list
// check (COMP-510, COMP-512) adds to a commit: the check alone (a read of
// the committer's identity topic, three updates, one of them a
// revocation of another key), next to the reference of the whole publish
// of one commit with commit acceptance on (public validation, the role
// policy, the check, the store's transaction), measured in the same run
// over a chain of b.N commits by a super admin in a group of three.
func BenchmarkCOMP512_RevokedCheck(b *testing.B) {
	ctx := context.Background()
	store, err := deliverydb.OpenSQLite(ctx, filepath.Join(b.TempDir(), "delivery.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	svc := delivery.New(store, &delivery.Options{Clock: clock.NewFake(time.Now()),
		PublicGroups: mls.NewPublicGroups(&mls.PublicOptions{})})
	w := world.NewEmbeddedOn(b, svc, 10*time.Minute)
	alice, bob, carol := w.Member("alice", world.Config{}), w.Member("bob", world.Config{}), w.Member("carol", world.Config{})
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "bench", Members: []string{bob.C.InboxID(), carol.C.InboxID()}})
	if err != nil {
		b.Fatal(err)
	}
	id := g.ID()
	topic, _ := identity.Topic(alice.C.InboxID())
	for range 2 {
		pub, _, _ := ed25519.GenerateKey(nil)
		u, err := identity.NewRevoke(alice.C.Identity().RecoveryKey, pub, time.Now().UnixNano())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := alice.Transport.Publish(ctx, []*backendpb.ClientEnvelope{{TargetTopic: topic,
			Payload: &backendpb.ClientEnvelope_IdentityUpdate{IdentityUpdate: u}}}); err != nil {
			b.Fatal(err)
		}
	}
	chain := make([][]byte, b.N)
	for i := range chain {
		alice.Tx(func(tx ports.Tx) error {
			out, err := alice.Engine.Commit(ctx, tx, id, ports.CommitOptions{ForcePath: true})
			if err != nil {
				return err
			}
			chain[i] = out.Commit
			_, err = alice.Engine.MergePending(ctx, tx, id)
			return err
		})
	}
	caller := ports.Caller{InstallationKey: alice.C.InstallationKey()}
	b.ResetTimer()
	t0 := time.Now()
	for _, c := range chain {
		if _, err := svc.Publish(ctx, caller, []*backendpb.ClientEnvelope{{TargetTopic: append([]byte{byte(ports.TopicGroupMessages)}, id...),
			Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: c}}}); err != nil {
			b.Fatal(err)
		}
	}
	publish := time.Since(t0)
	t0 = time.Now()
	for range b.N {
		if revoked, err := svc.RevokedIn(ctx, alice.C.InboxID(), alice.C.InstallationKey()); err != nil || revoked {
			b.Fatal(revoked, err)
		}
	}
	check := time.Since(t0)
	b.StopTimer()
	b.ReportMetric(float64(check.Microseconds())/float64(b.N), "µs/check")
	b.ReportMetric(float64(publish.Microseconds())/float64(b.N), "µs/commit-publish")
	b.ReportMetric(float64(check)/float64(publish), "check/publish")
}
