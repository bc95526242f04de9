package mls_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/ports"
)

// BenchmarkPublicApply measures public validation of one commit with a
// path (ports.PublicGroups.Apply) in groups of 100 and 1,000 members,
// next to the engine's full processing of the same commit by a member in
// the same loop: Process and MergeStaged through ports.MLS with the
// member's state in SQLite, in a transaction rolled back so that every
// iteration starts from the same state. Apply runs twice per iteration:
// on a validator whose cache holds the decoded state (the steady case of
// a service following a group commit by commit), and on one without a
// cache, which decodes the state from its bytes (the first commit after a
// restart, or a group the cache dropped). Metrics: ms/apply,
// ms/apply-uncached, ms/engine, ratio_to_engine and
// ratio_uncached_to_engine (wall time; the goal is at most 0.5 at 1,000
// members), the same ratios in this thread's CPU time (cpu_ratio_*, where
// the platform reports it), and state-B, the public state's encoded size.
func BenchmarkPublicApply(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("members-%d", n), func(b *testing.B) {
			ctx := context.Background()
			a, m, gid, commit := scaleSetup(b, n, benchStores(b)[0])
			var gi []byte
			a.tx(b, func(ctx context.Context, tx ports.Tx) (err error) {
				gi, err = a.engine.GroupInfo(ctx, tx, gid)
				return err
			})
			cached := mls.NewPublicGroups(nil)
			uncached := mls.NewPublicGroups(&mls.PublicOptions{CacheBytes: -1})
			st, err := cached.Open(ctx, gi)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := cached.Apply(ctx, st.State, commit); err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			// Wall time, and this thread's CPU time, which load from other
			// processes does not inflate.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var pub, cold, engine, pubCPU, coldCPU, engineCPU time.Duration
			for i := 0; i < b.N; i++ {
				c0, t0 := threadCPU(), time.Now()
				if _, err := cached.Apply(ctx, st.State, commit); err != nil {
					b.Fatal(err)
				}
				c1, t1 := threadCPU(), time.Now()
				if _, err := uncached.Apply(ctx, st.State, commit); err != nil {
					b.Fatal(err)
				}
				c2, t2 := threadCPU(), time.Now()
				m.rolledBack(b, func(ctx context.Context, tx ports.Tx) error {
					if _, err := m.engine.Process(ctx, tx, gid, commit); err != nil {
						return err
					}
					_, err := m.engine.MergeStaged(ctx, tx, gid)
					return err
				})
				pub, cold, engine = pub+t1.Sub(t0), cold+t2.Sub(t1), engine+time.Since(t2)
				pubCPU, coldCPU, engineCPU = pubCPU+c1-c0, coldCPU+c2-c1, engineCPU+threadCPU()-c2
			}
			if engineCPU > 0 {
				b.ReportMetric(pubCPU.Seconds()/engineCPU.Seconds(), "cpu_ratio_to_engine")
				b.ReportMetric(coldCPU.Seconds()/engineCPU.Seconds(), "cpu_ratio_uncached_to_engine")
			}
			b.ReportMetric(pub.Seconds()*1e3/float64(b.N), "ms/apply")
			b.ReportMetric(cold.Seconds()*1e3/float64(b.N), "ms/apply-uncached")
			b.ReportMetric(engine.Seconds()*1e3/float64(b.N), "ms/engine")
			b.ReportMetric(pub.Seconds()/engine.Seconds(), "ratio_to_engine")
			b.ReportMetric(cold.Seconds()/engine.Seconds(), "ratio_uncached_to_engine")
			b.ReportMetric(float64(len(st.State)), "state-B")
		})
	}
}
