package main

import (
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/deliverydb"
	"github.com/regroup-mls/regroup/adapters/grpctransport"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/internal/testenv"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// BenchmarkCOMP376_CommitPublishRate publishes one chain of b.N commits
// (a member's key updates with an UpdatePath, in a group of three) to two
// fresh regroupd processes on SQLite, one with -accept-commits and one
// without, one commit per publish, and reports each one's commits per
// second, their ratio (goal ≥ 0.8) and the public state the accepting one
// stores for the group.
func BenchmarkCOMP376_CommitPublishRate(b *testing.B) {
	home := testenv.StartRegroupd(b, "sqlite")
	w := world.NewOn(b, "sqlite", home, 10*time.Minute)
	alice, bob, carol := w.Member("alice", world.Config{}), w.Member("bob", world.Config{}), w.Member("carol", world.Config{})
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "bench", Members: []string{bob.C.InboxID(), carol.C.InboxID()}})
	if err != nil {
		b.Fatal(err)
	}
	id := g.ID()
	gi := groupInfo(b, alice, id)
	chain := make([][]byte, b.N)
	for i := range chain {
		alice.Tx(func(tx ports.Tx) error {
			out, err := alice.Engine.Commit(w.Ctx, tx, id, ports.CommitOptions{ForcePath: true})
			if err != nil {
				return err
			}
			chain[i] = out.Commit
			_, err = alice.Engine.MergePending(w.Ctx, tx, id)
			return err
		})
	}
	rate := func(args ...string) (float64, *testenv.Regroupd) {
		r := testenv.StartRegroupdWith(b, "sqlite", args...)
		_, key, _ := ed25519.GenerateKey(nil)
		tr, err := grpctransport.Dial(r.Addr, &grpctransport.ClientOptions{InstallationKey: key})
		if err != nil {
			b.Fatal(err)
		}
		defer tr.Close()
		env := func(kind ports.TopicKind, msg []byte) []*backendpb.ClientEnvelope {
			return []*backendpb.ClientEnvelope{{TargetTopic: topicOf(kind, id), Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: msg}}}
		}
		if _, err := tr.Publish(w.Ctx, env(ports.TopicGroupInfo, gi)); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for _, c := range chain {
			if _, err := tr.Publish(w.Ctx, env(ports.TopicGroupMessages, c)); err != nil {
				b.Fatal(err)
			}
		}
		return float64(len(chain)) / time.Since(start).Seconds(), r
	}
	b.ResetTimer()
	off, _ := rate("-rate", "-1")
	on, r := rate("-accept-commits", "-rate", "-1")
	b.StopTimer()
	b.ReportMetric(off, "commits/s-off")
	b.ReportMetric(on, "commits/s-on")
	b.ReportMetric(on/off, "on/off")
	store, err := deliverydb.OpenSQLite(w.Ctx, r.Flag("database"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	st, err := store.PublicState(w.Ctx, id)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(st.State)), "state-bytes/group-of-3")
}
