package mls_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/postgres"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// errRollback ends a benchmark transaction so that every iteration starts
// from the same stored state.
var errRollback = errors.New("rollback")

// storedInstallation is an engine whose state lives in a real store.
type storedInstallation struct {
	engine *mls.Engine
	store  ports.Store
	sig    []byte
	inbox  string
}

// benchStore is a kind of store a benchmark runs over: SQLite always,
// PostgreSQL when REGROUP_POSTGRES_DSN is set.
type benchStore struct {
	name string
	open func(b *testing.B, name string) ports.Store
}

func benchStores(b *testing.B) []benchStore {
	kinds := []benchStore{{name: "sqlite", open: func(b *testing.B, name string) ports.Store {
		return openSQLite(b, filepath.Join(b.TempDir(), name+".db"))
	}}}
	dsn := os.Getenv(postgres.EnvDSN)
	if dsn == "" {
		b.Logf("%s is not set: the PostgreSQL cases are skipped", postgres.EnvDSN)
		return kinds
	}
	return append(kinds, benchStore{name: "postgres", open: func(b *testing.B, name string) ports.Store {
		suffix := make([]byte, 5)
		_, _ = rand.Read(suffix)
		schema := "mlsbench_" + hex.EncodeToString(suffix) + "_" + name
		b.Cleanup(func() { dropSchema(b, dsn, schema) })
		return openPostgres(b, schema)
	}})
}

func newStoredInstallation(b *testing.B, st ports.Store, inbox string) *storedInstallation {
	b.Helper()
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	sig, _, _ := s.GenerateSignatureKey()
	e, err := mls.New(mls.Options{SignaturePrivateKey: sig, PastEpochs: 2})
	if err != nil {
		b.Fatal(err)
	}
	return &storedInstallation{engine: e, store: st, sig: sig, inbox: inbox}
}

func keyPackageOf(b testing.TB, e ports.MLS, sig []byte, inbox string) ports.KeyPackageBundle {
	b.Helper()
	cred, _ := proto.Marshal(&contentspb.MlsCredential{InboxId: inbox})
	kp, err := e.CreateKeyPackage(context.Background(), ports.KeyPackageOptions{
		Credential: cred, SignaturePrivateKey: sig, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour)})
	if err != nil {
		b.Fatal(err)
	}
	return kp
}

// tx runs fn in a transaction of in's store and commits it.
func (in *storedInstallation) tx(b *testing.B, fn func(ctx context.Context, tx ports.Tx) error) {
	b.Helper()
	if err := in.store.Tx(context.Background(), func(tx ports.Tx) error { return fn(context.Background(), tx) }); err != nil {
		b.Fatal(err)
	}
}

// rolledBack runs fn in a transaction of in's store and rolls it back.
func (in *storedInstallation) rolledBack(b *testing.B, fn func(ctx context.Context, tx ports.Tx) error) {
	err := in.store.Tx(context.Background(), func(tx ports.Tx) error {
		if err := fn(context.Background(), tx); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		b.Fatal(err)
	}
}

// countingBlobs counts the bytes a transaction puts.
type countingBlobs struct {
	ports.Blobs
	put *int
}

func (c countingBlobs) Put(ctx context.Context, ns, k string, v []byte) error {
	*c.put += len(v)
	return c.Blobs.Put(ctx, ns, k, v)
}

// countingTx is a transaction whose Blobs count what is put.
type countingTx struct {
	ports.Tx
	blobs countingBlobs
}

func (t countingTx) Blobs() ports.Blobs { return t.blobs }

// scaleSetup builds a group of n members in which creator a adds
// everyone in one commit and member m (stored in SQLite, like a) joins;
// two commits with a path follow, so that m holds the two past epochs it
// keeps, as in a group in use. It returns a third commit, built by a and
// left pending, for m to process.
func scaleSetup(b *testing.B, n int, kind benchStore) (a, m *storedInstallation, gid, commit []byte) {
	a = newStoredInstallation(b, kind.open(b, "creator"), "creator")
	m = newStoredInstallation(b, kind.open(b, "member"), "member")
	gid = []byte("engine-scale")
	mkp := keyPackageOf(b, m.engine, m.sig, m.inbox)
	adds := [][]byte{mkp.KeyPackage}
	for i := 2; i < n; i++ {
		other := newInstallationTB(b, fmt.Sprintf("member-%d", i))
		adds = append(adds, keyPackageOf(b, other.engine, other.sig, other.inbox).KeyPackage)
	}
	var welcome []byte
	a.tx(b, func(ctx context.Context, tx ports.Tx) error {
		if _, err := a.engine.CreateGroup(ctx, tx, gid, keyPackageOf(b, a.engine, a.sig, a.inbox), nil); err != nil {
			return err
		}
		out, err := a.engine.Commit(ctx, tx, gid, ports.CommitOptions{Add: adds})
		if err != nil {
			return err
		}
		welcome = out.Welcome
		_, err = a.engine.MergePending(ctx, tx, gid)
		return err
	})
	m.tx(b, func(ctx context.Context, tx ports.Tx) error {
		st, err := m.engine.StageWelcome(ctx, tx, welcome, ports.KeyPackageRecord{Ref: mkp.Ref, KeyPackage: mkp.KeyPackage,
			InitPrivateKey: mkp.InitPrivateKey, EncryptionPrivateKey: mkp.EncryptionPrivateKey})
		if err != nil {
			return err
		}
		_, err = m.engine.InstallWelcome(ctx, tx, st.Handle)
		return err
	})
	for i := range 3 {
		a.tx(b, func(ctx context.Context, tx ports.Tx) error {
			out, err := a.engine.Commit(ctx, tx, gid, ports.CommitOptions{ForcePath: true})
			commit = out.Commit
			if err != nil || i == 2 {
				return err
			}
			_, err = a.engine.MergePending(ctx, tx, gid)
			return err
		})
		if i < 2 {
			m.tx(b, func(ctx context.Context, tx ports.Tx) error {
				if _, err := m.engine.Process(ctx, tx, gid, commit); err != nil {
					return err
				}
				_, err := m.engine.MergeStaged(ctx, tx, gid)
				return err
			})
		}
	}
	return a, m, gid, commit
}

// storedSize returns the bytes of every blob of the group's state in m's
// store.
func storedSize(b *testing.B, m *storedInstallation, gid []byte) int {
	size := 0
	m.tx(b, func(ctx context.Context, tx ports.Tx) error {
		for _, ns := range []string{"mls.group", "mls.tree"} {
			keys, err := tx.Blobs().Keys(ctx, ns, fmt.Sprintf("%x", gid))
			if err != nil {
				return err
			}
			for _, k := range keys {
				v, err := tx.Blobs().Get(ctx, ns, k)
				if err != nil {
					return err
				}
				size += len(v)
			}
		}
		return nil
	})
	return size
}

// BenchmarkEngineScale measures what a client pays per commit through
// ports.MLS with its state in SQLite and, when REGROUP_POSTGRES_DSN is
// set, PostgreSQL, for groups of 10, 100, 1,000 and 10,000 members, next to the same work on the group in memory (package group),
// measured in the same loop: each iteration processes and merges a
// commit with a path through the port (Process, MergeStaged) in one
// transaction, rolled back so that every iteration starts from the same
// stored state, then stages and merges the same commit on a copy of the
// member's group in memory (StageCommit, MergePending; the copy is made
// outside the timing). Metrics: ms/port, ms/in-memory,
// ratio_to_in_memory (wall time), cpu_ratio_to_in_memory (the same in
// this thread's CPU time, where the platform reports it), stored-B/commit
// (the bytes the transaction writes) and state-B (the member's whole
// stored state). create-commit measures
// the committer building a commit (the first after a bulk add, so its
// path secret is encrypted to every other leaf) the same way.
func BenchmarkEngineScale(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 10000} {
		for _, kind := range benchStores(b) {
			b.Run(fmt.Sprintf("members-%d/%s", n, kind.name), func(b *testing.B) { benchmarkEngineScale(b, n, kind) })
		}
	}
}

func benchmarkEngineScale(b *testing.B, n int, kind benchStore) {
	a, m, gid, commit := scaleSetup(b, n, kind)
	msg, err := framing.Decode(commit)
	if err != nil {
		b.Fatal(err)
	}
	var base *group.Group
	m.tx(b, func(ctx context.Context, tx ports.Tx) error {
		base, err = m.engine.LoadGroup(ctx, tx, gid)
		return err
	})
	state := storedSize(b, m, gid)
	b.Run("process-and-merge-commit", func(b *testing.B) {
		// Wall time, and this thread's CPU time, which load from
		// other processes does not inflate.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var port, mem, portCPU, memCPU time.Duration
		written := 0
		for i := 0; i < b.N; i++ {
			c0 := threadCPU()
			t0 := time.Now()
			m.rolledBack(b, func(ctx context.Context, tx ports.Tx) error {
				written = 0
				ctx2 := countingTx{Tx: tx, blobs: countingBlobs{Blobs: tx.Blobs(), put: &written}}
				if _, err := m.engine.Process(ctx, ctx2, gid, commit); err != nil {
					return err
				}
				_, err := m.engine.MergeStaged(ctx, ctx2, gid)
				return err
			})
			t1, c1 := time.Now(), threadCPU()
			g := base.Clone()
			c2, t2 := threadCPU(), time.Now()
			p, err := g.StageCommit(msg)
			if err == nil {
				err = g.MergePending(p)
			}
			if err != nil {
				b.Fatal(err)
			}
			port, mem = port+t1.Sub(t0), mem+time.Since(t2)
			portCPU, memCPU = portCPU+c1-c0, memCPU+threadCPU()-c2
		}
		b.ReportMetric(port.Seconds()*1e3/float64(b.N), "ms/port")
		b.ReportMetric(mem.Seconds()*1e3/float64(b.N), "ms/in-memory")
		b.ReportMetric(port.Seconds()/mem.Seconds(), "ratio_to_in_memory")
		if memCPU > 0 {
			b.ReportMetric(portCPU.Seconds()/memCPU.Seconds(), "cpu_ratio_to_in_memory")
		}
		b.ReportMetric(float64(written), "stored-B/commit")
		b.ReportMetric(float64(state), "state-B")
	})
	var abase *group.Group
	a.tx(b, func(ctx context.Context, tx ports.Tx) error {
		abase, err = a.engine.LoadGroup(ctx, tx, gid)
		return err
	})
	b.Run("create-commit", func(b *testing.B) {
		var port, mem time.Duration
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			a.rolledBack(b, func(ctx context.Context, tx ports.Tx) error {
				_, err := a.engine.Commit(ctx, tx, gid, ports.CommitOptions{ForcePath: true})
				return err
			})
			t1 := time.Now()
			if _, err := abase.Commit(&group.CommitOptions{Path: true, WireFormat: framing.WirePublicMessage, TreeInWelcome: true}); err != nil {
				b.Fatal(err)
			}
			port, mem = port+t1.Sub(t0), mem+time.Since(t1)
		}
		b.ReportMetric(port.Seconds()*1e3/float64(b.N), "ms/port")
		b.ReportMetric(mem.Seconds()*1e3/float64(b.N), "ms/in-memory")
		b.ReportMetric(port.Seconds()/mem.Seconds(), "ratio_to_in_memory")
	})
}

// BenchmarkEngineJoin measures joining groups of 10, 100, 1,000 and
// 10,000 members through ports.MLS with the joiner's state in SQLite and,
// when REGROUP_POSTGRES_DSN is set, PostgreSQL — StageWelcome then
// InstallWelcome, in one transaction rolled back so that every iteration
// starts from the same store — next to two references measured in the
// same loop: the engine's join in memory (package group, from the
// Welcome's bytes) and verifying the signature of every leaf of the
// group's tree one by one. Metrics: ms/join, ms/in-memory,
// ms/verify-leaves-singly, ratio_to_single_verify, ratio_to_in_memory,
// and the bytes and allocations of the join alone (join-B/op,
// join-allocs/op) beside the bytes of the join in memory
// (in-memory-B/op).
func BenchmarkEngineJoin(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 10000} {
		for _, kind := range benchStores(b) {
			b.Run(fmt.Sprintf("members-%d/%s", n, kind.name), func(b *testing.B) { benchmarkEngineJoin(b, n, kind) })
		}
	}
}

// allocated returns the bytes and allocations fn makes, from
// runtime.MemStats around it (other goroutines' allocations included).
func allocated(fn func()) (bytes, allocs uint64) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, after.Mallocs - before.Mallocs
}

// joinBench is a group of n-1 members whose creator a added j, and the
// Welcome j joins with.
type joinBench struct {
	a   *installation
	j   *storedInstallation
	gid []byte
	kp  ports.KeyPackageBundle
	out ports.CommitOutput
	rec ports.KeyPackageRecord
}

// newJoinBench builds a group of n-1 members in memory and the commit
// that adds a joiner whose state is in st.
func newJoinBench(b *testing.B, n int, st ports.Store) *joinBench {
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
	j := newStoredInstallation(b, st, "joiner")
	kp := keyPackageOf(b, j.engine, j.sig, j.inbox)
	out, err := a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{Add: [][]byte{kp.KeyPackage}})
	if err != nil {
		b.Fatal(err)
	}
	rec := ports.KeyPackageRecord{Ref: kp.Ref, KeyPackage: kp.KeyPackage, InitPrivateKey: kp.InitPrivateKey, EncryptionPrivateKey: kp.EncryptionPrivateKey}
	return &joinBench{a: a, j: j, gid: gid, kp: kp, out: out, rec: rec}
}

// join stages and installs the Welcome in a transaction rolled back.
func (jb *joinBench) join(b *testing.B) {
	jb.j.rolledBack(b, func(ctx context.Context, tx ports.Tx) error {
		st, err := jb.j.engine.StageWelcome(ctx, tx, jb.out.Welcome, jb.rec)
		if err != nil {
			return err
		}
		_, err = jb.j.engine.InstallWelcome(ctx, tx, st.Handle)
		return err
	})
}

func benchmarkEngineJoin(b *testing.B, n int, kind benchStore) {
	ctx := context.Background()
	jbench := newJoinBench(b, n, kind.open(b, "joiner"))
	a, j, gid, kp, out := jbench.a, jbench.j, jbench.gid, jbench.kp, jbench.out
	g, err := a.engine.LoadGroup(ctx, a.tx, gid)
	if err != nil {
		b.Fatal(err)
	}
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	var mkp message.KeyPackage
	if err := codec.Unmarshal(kp.KeyPackage, &mkp); err != nil {
		b.Fatal(err)
	}
	var joined, mem, ref time.Duration
	var bytes, allocs, memBytes uint64
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		jb, ja := allocated(func() { jbench.join(b) })
		t1 := time.Now()
		mb, _ := allocated(func() {
			m, err := framing.Decode(out.Welcome)
			if err == nil {
				_, err = group.Join(s, m.Welcome, &group.JoinOptions{KeyPackage: &mkp, InitPriv: kp.InitPrivateKey,
					EncryptionPriv: kp.EncryptionPrivateKey, SignaturePriv: j.sig})
			}
			if err != nil {
				b.Fatal(err)
			}
		})
		t2 := time.Now()
		for _, l := range g.Members() { // the tree before the joiner's leaf
			if err := g.LeafNode(l).Verify(s, gid, uint32(l)); err != nil {
				b.Fatal(err)
			}
		}
		joined, mem, ref = joined+t1.Sub(t0), mem+t2.Sub(t1), ref+time.Since(t2)
		bytes, allocs, memBytes = bytes+jb, allocs+ja, memBytes+mb
	}
	b.ReportMetric(joined.Seconds()*1e3/float64(b.N), "ms/join")
	b.ReportMetric(mem.Seconds()*1e3/float64(b.N), "ms/in-memory")
	b.ReportMetric(ref.Seconds()*1e3/float64(b.N), "ms/verify-leaves-singly")
	b.ReportMetric(joined.Seconds()/ref.Seconds(), "ratio_to_single_verify")
	b.ReportMetric(joined.Seconds()/mem.Seconds(), "ratio_to_in_memory")
	b.ReportMetric(float64(bytes)/float64(b.N), "join-B/op")
	b.ReportMetric(float64(allocs)/float64(b.N), "join-allocs/op")
	b.ReportMetric(float64(memBytes)/float64(b.N), "in-memory-B/op")
}
