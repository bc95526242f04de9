package main

import (
	"context"
	"crypto/ed25519"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/internal/testenv"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCOMP404_CommitPublishCPU publishes one chain of b.N commits (a
// member's key updates with an UpdatePath, in a group of three) to an
// in-process service on SQLite, one commit per publish, in rounds that
// alternate acceptance off and on, each on a fresh database; it reports
// the CPU time per commit of each (the process's, which holds nothing
// else busy) and their ratio, and the wall-clock rate of each. CPU time
// is what a loaded machine does not distort; on/off is the publish rate
// ratio that CPU alone allows.
func BenchmarkCOMP404_CommitPublishCPU(b *testing.B) {
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
	_, key, _ := ed25519.GenerateKey(nil)
	caller := ports.Caller{InstallationKey: key.Public().(ed25519.PublicKey)}
	env := func(kind ports.TopicKind, msg []byte) []*backendpb.ClientEnvelope {
		return []*backendpb.ClientEnvelope{{TargetTopic: topicOf(kind, id), Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: msg}}}
	}
	round := func(accept bool) (cpu, wall time.Duration) {
		cfg, err := parseConfig([]string{"-listen", "127.0.0.1:0", "-health-listen", "", "-rate", "-1"})
		if err != nil {
			b.Fatal(err)
		}
		cfg.Database, cfg.AcceptCommits = filepath.Join(b.TempDir(), "regroupd.db"), accept
		srv, err := start(context.Background(), cfg, quietLog())
		if err != nil {
			b.Fatal(err)
		}
		defer srv.stop()
		if _, err := srv.svc.Publish(w.Ctx, caller, env(ports.TopicGroupInfo, gi)); err != nil {
			b.Fatal(err)
		}
		c0, w0 := cpuTime(), time.Now()
		for _, c := range chain {
			if _, err := srv.svc.Publish(w.Ctx, caller, env(ports.TopicGroupMessages, c)); err != nil {
				b.Fatal(err)
			}
		}
		return cpuTime() - c0, time.Since(w0)
	}
	b.ResetTimer()
	var cpu, wall [2]time.Duration
	for range 2 {
		for i, accept := range []bool{false, true} {
			c, w := round(accept)
			cpu[i] += c
			wall[i] += w
		}
	}
	b.StopTimer()
	n := float64(2 * len(chain))
	b.ReportMetric(float64(cpu[0].Microseconds())/n, "cpu-µs/commit-off")
	b.ReportMetric(float64(cpu[1].Microseconds())/n, "cpu-µs/commit-on")
	b.ReportMetric(float64(cpu[0])/float64(cpu[1]), "cpu-on/off-rate")
	b.ReportMetric(n/wall[0].Seconds(), "commits/s-off")
	b.ReportMetric(n/wall[1].Seconds(), "commits/s-on")
}
