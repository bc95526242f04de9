package join_test

import (
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkOfflineWelcomes measures the welcome pass of a user who was
// offline while 300 groups added it (more than the default held bound of
// 256, COMP-253): every Welcome must join, and the pass's cost per
// Welcome is reported next to the reference measured in the same run, one
// pass over a single waiting Welcome.
func BenchmarkOfflineWelcomes(b *testing.B) {
	pass := func(b *testing.B, n int) (time.Duration, int) {
		w := newWorld(b, "sqlite")
		a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{})
		seqs := offline(a, j, n)
		j.store.Close()
		pristine := filepath.Join(b.TempDir(), "pristine.db")
		copyStore(b, j.locator, pristine)
		var total time.Duration
		for i := 0; i < b.N; i++ {
			copyStore(b, pristine, j.locator)
			j.reopen()
			j.joined = nil
			start := time.Now()
			j.process()
			total += time.Since(start)
			if len(j.joined) != len(seqs) {
				b.Fatalf("%d of %d Welcomes joined", len(j.joined), len(seqs))
			}
			j.store.Close()
		}
		return total, n
	}
	b.StopTimer()
	ref, _ := pass(b, 1)
	got, n := pass(b, 300)
	perRef := float64(ref.Nanoseconds()) / float64(b.N)
	per := float64(got.Nanoseconds()) / float64(b.N*n)
	b.ReportMetric(per, "ns/welcome")
	b.ReportMetric(perRef, "single-welcome-pass-ns")
	b.ReportMetric(per/perRef, "x-single-welcome-pass")
	b.ReportMetric(float64(n)*1e9/(float64(got.Nanoseconds())/float64(b.N)), "welcomes/s")
}
