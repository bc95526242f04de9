//go:build unix

package client_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
)

// BenchmarkManyGroups measures one installation in N conversations on the
// embedded default (SQLite client stores, an in-process delivery service
// on SQLite): bob is added to N groups that alice creates, carol to the
// first 100 of them only, so carol is the in-run reference of a client
// holding just the groups that change. It reports
//
//   - welcomes/s: bob's Welcomes processed per second while joining;
//   - idle-sync-ms and idle-calls: one SyncAll with nothing new, and its
//     transport calls; ref-idle-sync-ms is carol's;
//   - changed-sync-ms: a SyncAll after a message in each of the 100
//     shared groups (the mean of two rounds), ref-changed-sync-ms
//     carol's same syncs, x-ref their ratio (goal ≤ 1.5 at 10,000) and
//     x-ref-cpu the ratio of the process CPU time the two syncs took;
//   - startup-ms: a new client on bob's store, its first SyncAll and its
//     subscriptions open;
//   - idle-cpu-% and creator-idle-cpu-%: the process CPU over the idle
//     window (REGROUP_BENCH_IDLE, default 60s) while only bob's workers
//     run, then only alice's (the creator of every group), each with the
//     default intervals;
//   - heap-per-group-B: the heap bob's started client (and its
//     subscriptions in the in-process service) holds, per group;
//   - store-MB and rss-MB: bob's SQLite store, and the process's RSS;
//   - setup-s: the set-up, from the first group created to every member
//     synced with every conversation accepted.
//
// Bob joins each 200 groups alice creates in one sync. N is 100 and 1,000; REGROUP_BENCH_GROUPS
// (say "10000") replaces the list. Each size runs once, whatever b.N.
// REGROUP_BENCH_PROFILE names a directory that receives a CPU profile of
// the changed syncs and of each idle window.
func BenchmarkManyGroups(b *testing.B) {
	sizes := []int{100, 1000}
	if s := os.Getenv("REGROUP_BENCH_GROUPS"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 100 {
				b.Fatalf("REGROUP_BENCH_GROUPS: %q is not a size of at least 100", f)
			}
			sizes = append(sizes, n)
		}
	}
	idle := 60 * time.Second
	if s := os.Getenv("REGROUP_BENCH_IDLE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatal(err)
		}
		idle = d
	}
	for _, n := range sizes {
		b.Run(fmt.Sprint("groups=", n), func(b *testing.B) { benchManyGroups(b, n, idle) })
	}
}

const (
	changedGroups = 100
	// createBatch groups are created between two syncs of bob.
	createBatch = 200
)

func benchManyGroups(b *testing.B, n int, idle time.Duration) {
	// The creator publishes about 3.8 KB of Welcome per group within the
	// set-up, so past about 8,800 groups in an hour the default Welcome
	// quota of 32 MiB per installation and hour (COMP-325) refuses it;
	// the benchmark raises that quota, every other default stays.
	quotas := delivery.DefaultQuotas()
	quotas[ports.TopicWelcomes] = delivery.Quota{Bytes: 1 << 30, Window: time.Hour}
	w := world.NewEmbeddedWith(b, 3*time.Hour, delivery.Options{Quotas: quotas})
	quiet := &client.Options{SyncInterval: time.Hour, CommitLogInterval: 10 * time.Second}
	aliceCalls := &callCounter{calls: map[string]int{}, queries: map[string]int{}}
	alice := w.Member("alice", world.Config{Options: quiet, Transport: func(tr ports.Transport) ports.Transport {
		aliceCalls.Transport = tr
		return aliceCalls
	}})
	bobCalls := &callCounter{calls: map[string]int{}, queries: map[string]int{}}
	bob := w.Member("bob", world.Config{Options: quiet, Transport: func(tr ports.Transport) ports.Transport {
		bobCalls.Transport = tr
		return bobCalls
	}})
	carolCalls := &callCounter{calls: map[string]int{}, queries: map[string]int{}}
	carol := w.Member("carol", world.Config{Options: quiet, Transport: func(tr ports.Transport) ports.Transport {
		carolCalls.Transport = tr
		return carolCalls
	}})
	var shared [][]byte
	var joining time.Duration
	setup := time.Now()
	// Bob joins each batch of createBatch groups in one sync.
	ids := make([][]byte, n)
	for i := range n {
		members := []string{bob.C.InboxID()}
		if i < changedGroups {
			members = append(members, carol.C.InboxID())
		}
		g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: fmt.Sprint("g", i), Members: members})
		if err != nil {
			b.Fatalf("group %d: %v", i, err)
		}
		ids[i] = g.ID()
		if (i+1)%createBatch == 0 || i == n-1 {
			start := time.Now()
			bob.Sync()
			joining += time.Since(start)
		}
	}
	shared = ids[:min(changedGroups, n)]
	b.ReportMetric(float64(n)/joining.Seconds(), "welcomes/s")
	carol.Sync()
	// The members accept every conversation, so they read its commit log
	// too: two topics per group.
	for _, m := range []*world.Member{bob, carol} {
		convs, err := m.C.Conversations(w.Ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, cv := range convs {
			if err := cv.SetConsent(w.Ctx, ports.ConsentAllowed); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, m := range []*world.Member{alice, bob, carol} {
		m.Sync()
	}
	b.ReportMetric(time.Since(setup).Seconds(), "setup-s")

	idleSync := func(m *world.Member, c *callCounter) (time.Duration, int) {
		m.Sync() // settles what the last one left
		c.reset()
		start := time.Now()
		m.Sync()
		d := time.Since(start)
		c.mu.Lock()
		defer c.mu.Unlock()
		calls := 0
		for _, k := range c.calls {
			calls += k
		}
		return d, calls
	}
	d, calls := idleSync(bob, bobCalls)
	refD, _ := idleSync(carol, carolCalls)
	b.ReportMetric(ms(d), "idle-sync-ms")
	b.ReportMetric(float64(calls), "idle-calls")
	b.ReportMetric(ms(refD), "ref-idle-sync-ms")

	// Two rounds of a message in each shared group, bob and carol syncing
	// in turn, first one then the other, so that neither gains from
	// going second.
	var changed, refChanged, changedCPU, refChangedCPU time.Duration
	timed := func(m *world.Member, wall, cpu *time.Duration) {
		start, cpu0 := time.Now(), cpuTime()
		m.Sync()
		*wall += time.Since(start)
		*cpu += cpuTime() - cpu0
	}
	stop := phaseProfile(b, "changed-sync")
	for round := range 2 {
		for _, id := range shared {
			if _, err := alice.Conv(id).Send(w.Ctx, []byte("changed")); err != nil {
				b.Fatal(err)
			}
		}
		if round == 0 {
			timed(bob, &changed, &changedCPU)
			timed(carol, &refChanged, &refChangedCPU)
		} else {
			timed(carol, &refChanged, &refChangedCPU)
			timed(bob, &changed, &changedCPU)
		}
	}
	stop()
	changed, refChanged = changed/2, refChanged/2
	b.ReportMetric(float64(changedCPU)/float64(refChangedCPU), "x-ref-cpu")
	b.ReportMetric(ms(changed), "changed-sync-ms")
	b.ReportMetric(ms(refChanged), "ref-changed-sync-ms")
	b.ReportMetric(float64(changed)/float64(refChanged), "x-ref")

	// Start-up: a new client on bob's store, its first sync and its
	// subscriptions.
	heap0 := heapInUse()
	opened := bobCalls.subscribes()
	start := time.Now()
	bob.Restart(nil) // the default intervals from here on
	if err := bob.C.Start(w.Ctx); err != nil {
		b.Fatal(err)
	}
	waitSubscribed(b, bobCalls, opened, (2*n+1+1023)/1024)
	b.ReportMetric(ms(time.Since(start)), "startup-ms")
	b.ReportMetric(float64(heapInUse()-heap0)/float64(n), "heap-per-group-B")
	stop = phaseProfile(b, "idle-member")
	b.ReportMetric(cpuPercent(idle), "idle-cpu-%")
	stop()
	bob.Close()

	opened = aliceCalls.subscribes()
	alice.Restart(nil)
	if err := alice.C.Start(w.Ctx); err != nil {
		b.Fatal(err)
	}
	waitSubscribed(b, aliceCalls, opened, 1)
	time.Sleep(5 * time.Second) // the rest of its first sync
	stop = phaseProfile(b, "idle-creator")
	b.ReportMetric(cpuPercent(idle), "creator-idle-cpu-%")
	stop()

	if fi, err := os.Stat(bob.Path); err == nil {
		size := fi.Size()
		if wal, err := os.Stat(bob.Path + "-wal"); err == nil {
			size += wal.Size()
		}
		b.ReportMetric(float64(size)/(1<<20), "store-MB")
	}
	b.ReportMetric(rssMB(), "rss-MB")
}

// phaseProfile writes a CPU profile of one phase to
// $REGROUP_BENCH_PROFILE/<phase>.pprof when that directory is set, and
// returns what stops it.
func phaseProfile(b *testing.B, phase string) func() {
	dir := os.Getenv("REGROUP_BENCH_PROFILE")
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, phase+".pprof"))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		b.Logf("no %s profile: %v", phase, err)
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// cpuPercent returns the process's CPU time over d as a percentage of one
// core.
func cpuPercent(d time.Duration) float64 {
	before := cpuTime()
	time.Sleep(d)
	return 100 * float64(cpuTime()-before) / float64(d)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func rssMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

func (c *callCounter) subscribes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls["Subscribe"]
}

func (c *callCounter) Subscribe(ctx context.Context, cursors []ports.TopicCursor) (ports.Subscription, error) {
	c.count("Subscribe", nil)
	return c.Transport.Subscribe(ctx, cursors)
}

// waitSubscribed waits until c has opened want more subscriptions than
// before.
func waitSubscribed(b *testing.B, c *callCounter, before, want int) {
	deadline := time.Now().Add(10 * time.Minute)
	for c.subscribes()-before < want {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d subscriptions opened", c.subscribes()-before, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
