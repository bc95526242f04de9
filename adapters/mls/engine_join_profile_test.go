package mls_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"
)

// BenchmarkEngineJoinProfile measures what a join through ports.MLS
// (StageWelcome then InstallWelcome, SQLite, rolled back) allocates, with
// nothing else in the timed loop: join-B/op and join-allocs/op. With
// REGROUP_JOIN_PROFILE_DIR set it records every allocation of the timed
// joins (runtime.MemProfileRate 1 from the first join on) and writes the
// allocs profile before (base.mem) and after them (after.mem), so that
//
//	go tool pprof -sample_index=alloc_space -diff_base=DIR/base.mem -top mls.test DIR/after.mem
//
// shows where the joins' bytes go, the batch verifier's goroutines
// included.
func BenchmarkEngineJoinProfile(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("members-%d", n), func(b *testing.B) { benchmarkEngineJoinProfile(b, n) })
	}
}

func benchmarkEngineJoinProfile(b *testing.B, n int) {
	jb := newJoinBench(b, n, openSQLite(b, filepath.Join(b.TempDir(), "joiner.db")))
	join := func() { jb.join(b) }
	dir := os.Getenv("REGROUP_JOIN_PROFILE_DIR")
	if dir != "" {
		runtime.MemProfileRate = 1
	}
	join() // warm: the engine's caches and the store's statements
	runtime.GC()
	writeAllocs(b, dir, "base.mem")
	var bytes, allocs uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n, a := allocated(join)
		bytes, allocs = bytes+n, allocs+a
	}
	b.StopTimer()
	runtime.GC()
	writeAllocs(b, dir, "after.mem")
	b.ReportMetric(float64(bytes)/float64(b.N), "join-B/op")
	b.ReportMetric(float64(allocs)/float64(b.N), "join-allocs/op")
}

// writeAllocs writes the allocs profile to dir/name when dir is set.
func writeAllocs(b *testing.B, dir, name string) {
	if dir == "" {
		return
	}
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}
