package recovery_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/recovery"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/mlsfault"
)

// Worker intervals of the benchmark's clients: the defaults of
// client.Options. Every step of a repair is woken by what precedes it (a
// subscription, a merged commit, a fork, a kept request), so the
// intervals are the fallback, not the pace.
const (
	benchCommitLogInterval = 10 * time.Second
	benchRecoveryInterval  = 10 * time.Second
	benchSyncInterval      = 30 * time.Second
)

// BenchmarkRepair measures, in a group of 10 and of 100 members (one
// client each, with its own SQLite store and gRPC connection, all on one
// regroupd process on SQLite, every client's workers running), the time
// from the commit that forks one member to every member reading not
// forked: the member's log diverges at that commit (the fork the readd
// of section 7 repairs), it detects it and sends a request to the only
// super admin, who publishes a readd commit; the member rejoins from its
// Welcome; a key update after the rejoin — the first commit the rejoined
// member can compare — brings every member to not forked. The reference,
// measured in the same run, is one key update from the commit to every
// member not forked. One op is one fork repaired. It reports each phase:
// detect (the fork-causing commit to the member reading forked), request
// (to the readder keeping its request), readd (to the readd commit
// merged by the readder), rejoin (to the member's Welcome installed),
// settle (the key update after the rejoin to every member not forked).
func BenchmarkRepair(b *testing.B) {
	for _, n := range []int{10, 100} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) { benchRepair(b, n) })
	}
}

func benchRepair(b *testing.B, n int) {
	g := newBenchGroup(b, n)
	b.ResetTimer()
	var sum phases
	for i := 0; i < b.N; i++ {
		sum.add(g.repair(b))
	}
	b.StopTimer()
	ref := g.commitRound(b)
	per := func(d time.Duration) float64 { return float64(d.Milliseconds()) / float64(b.N) }
	b.ReportMetric(per(sum.detect), "detect-ms")
	b.ReportMetric(per(sum.request), "request-ms")
	b.ReportMetric(per(sum.readd), "readd-ms")
	b.ReportMetric(per(sum.rejoin), "rejoin-ms")
	b.ReportMetric(per(sum.settle), "settle-ms")
	b.ReportMetric(per(sum.total()), "repair-ms")
	b.ReportMetric(float64(ref.Milliseconds()), "ref-commit-round-ms")
	b.ReportMetric(per(sum.total())/float64(ref.Milliseconds()), "x-commit-round")
}

// phases are the durations of one repair's steps.
type phases struct{ detect, request, readd, rejoin, settle time.Duration }

func (p *phases) add(q phases) {
	p.detect += q.detect
	p.request += q.request
	p.readd += q.readd
	p.rejoin += q.rejoin
	p.settle += q.settle
}

func (p phases) total() time.Duration { return p.detect + p.request + p.readd + p.rejoin + p.settle }

// benchGroup is a group of started clients: alice its creator and only
// super admin, victim the member that forks.
type benchGroup struct {
	w      *world.World
	id     []byte
	alice  *world.Member
	victim *world.Member
	all    []*world.Member
	// seen records, per event kind, when alice's or the victim's events
	// arrived since the last mark.
	mu   sync.Mutex
	seen map[string]time.Time
	cond *sync.Cond
}

func newBenchGroup(b *testing.B, n int) *benchGroup {
	w := world.NewFor(b, "sqlite", 30*time.Minute)
	opts := func(p client.RecoveryPolicy) *client.Options {
		return &client.Options{Recovery: p, CommitLogInterval: benchCommitLogInterval,
			RecoveryInterval: benchRecoveryInterval, SyncInterval: benchSyncInterval}
	}
	g := &benchGroup{w: w, seen: map[string]time.Time{}}
	g.cond = sync.NewCond(&g.mu)
	g.alice = w.Member("alice", world.Config{Options: opts(client.RecoveryPolicy{})})
	g.victim = w.Member("victim", world.Config{Options: opts(client.RecoveryPolicy{Mode: client.RecoverAll})})
	g.all = []*world.Member{g.alice, g.victim}
	for i := 2; i < n; i++ {
		g.all = append(g.all, w.Member(fmt.Sprintf("m%03d", i), world.Config{Options: opts(client.RecoveryPolicy{})}))
	}
	var inboxes []string
	for _, m := range g.all[1:] {
		inboxes = append(inboxes, m.C.InboxID())
	}
	cv, err := g.alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "bench", Members: inboxes})
	if err != nil {
		b.Fatal(err)
	}
	g.id = cv.ID()
	world.Round(g.all[1:]...)
	allow(b, g.id, g.all[1:]...)
	for _, m := range g.all {
		if err := m.C.Start(w.Ctx); err != nil {
			b.Fatal(err)
		}
		if m != g.alice && m != g.victim {
			go func() {
				for range m.C.Events() { // drained: the app of a member
				}
			}()
		}
	}
	go g.watch(g.alice)
	go g.watch(g.victim)
	g.commitRound(b) // every member not forked before the first fork
	return g
}

// watch records the events of a repair that m reports.
func (g *benchGroup) watch(m *world.Member) {
	for ev := range m.C.Events() {
		var k string
		switch e := ev.(type) {
		case client.ForkStateEvent:
			if e.State == ports.ForkForked && bytes.Equal(e.GroupID, g.id) {
				k = "forked"
			}
		case client.RecoveryEvent:
			if e.Kind == recovery.RequestReceived || e.Kind == recovery.ReaddPublished {
				k = string(e.Kind)
			}
		case client.JoinedEvent:
			if e.Rejoined && bytes.Equal(e.GroupID, g.id) {
				k = "rejoined"
			}
		}
		if k == "" {
			continue
		}
		g.mu.Lock()
		if _, ok := g.seen[k]; !ok {
			g.seen[k] = time.Now()
		}
		g.cond.Broadcast()
		g.mu.Unlock()
	}
}

// await waits for the event kind since the last mark and returns when it
// arrived.
func (g *benchGroup) await(b *testing.B, k string) time.Time {
	b.Helper()
	deadline := time.AfterFunc(5*time.Minute, func() {
		g.mu.Lock()
		g.seen["timeout"] = time.Now()
		g.cond.Broadcast()
		g.mu.Unlock()
	})
	defer deadline.Stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	for {
		if at, ok := g.seen[k]; ok {
			return at
		}
		if _, ok := g.seen["timeout"]; ok {
			b.Fatalf("no %q within 5 minutes", k)
		}
		g.cond.Wait()
	}
}

func (g *benchGroup) mark() {
	g.mu.Lock()
	g.seen = map[string]time.Time{}
	g.mu.Unlock()
}

// repair forks the victim and waits for every member to be not forked.
func (g *benchGroup) repair(b *testing.B) phases {
	g.mark()
	g.victim.Engine.Arm(g.id, mlsfault.MisrecordAuthenticator)
	start := time.Now()
	if err := g.alice.Conv(g.id).UpdateKeys(g.w.Ctx); err != nil {
		b.Fatal(err)
	}
	forked := g.await(b, "forked")
	received := g.await(b, string(recovery.RequestReceived))
	readd := g.await(b, string(recovery.ReaddPublished))
	rejoined := g.await(b, "rejoined")
	settle := g.commitRound(b)
	return phases{detect: forked.Sub(start), request: received.Sub(forked), readd: readd.Sub(received),
		rejoin: rejoined.Sub(readd), settle: settle}
}

// commitRound has alice commit a key update and returns the time until
// every member reads not forked.
func (g *benchGroup) commitRound(b *testing.B) time.Duration {
	start := time.Now()
	if err := g.alice.Conv(g.id).UpdateKeys(g.w.Ctx); err != nil {
		b.Fatal(err)
	}
	deadline := start.Add(5 * time.Minute)
	for {
		behind := 0
		for _, m := range g.all {
			if st, err := m.Conv(g.id).ForkState(g.w.Ctx); err != nil || st.State != ports.ForkNotForked {
				behind++
			}
		}
		if behind == 0 {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d members not forked-free 5 minutes after a commit", behind)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
