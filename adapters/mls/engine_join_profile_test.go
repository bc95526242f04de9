package mls_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"

	"github.com/regroup-mls/regroup/ports"
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
	ctx := context.Background()
	a := newInstallationTB(b, "inbox-a")
	gid := []byte("engine-join")
	if _, err := a.engine.CreateGroup(ctx, a.tx, gid, a.keyPackageTB(b), nil); err != nil {
		b.Fatal(err)
	}
	var adds [][]byte
	for i := 2; i < n; i++ {
		adds = append(adds, newInstallationTB(b, fmt.Sprintf("member-%d", i)).keyPackageTB(b).KeyPackage)
	}
	if _, err := a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{Add: adds}); err != nil {
		b.Fatal(err)
	}
	if _, err := a.engine.MergePending(ctx, a.tx, gid); err != nil {
		b.Fatal(err)
	}
	j := newStoredInstallation(b, openSQLite(b, filepath.Join(b.TempDir(), "joiner.db")), "joiner")
	kp := keyPackageOf(b, j.engine, j.sig, j.inbox)
	out, err := a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{Add: [][]byte{kp.KeyPackage}})
	if err != nil {
		b.Fatal(err)
	}
	rec := ports.KeyPackageRecord{Ref: kp.Ref, KeyPackage: kp.KeyPackage, InitPrivateKey: kp.InitPrivateKey, EncryptionPrivateKey: kp.EncryptionPrivateKey}
	join := func() {
		j.rolledBack(b, func(ctx context.Context, tx ports.Tx) error {
			st, err := j.engine.StageWelcome(ctx, tx, out.Welcome, rec)
			if err != nil {
				return err
			}
			_, err = j.engine.InstallWelcome(ctx, tx, st.Handle)
			return err
		})
	}
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
		jb, ja := allocated(join)
		bytes, allocs = bytes+jb, allocs+ja
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
