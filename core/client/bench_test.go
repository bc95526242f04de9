package client_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/keypackage"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// BenchmarkMessages measures application messages sent by one client and
// received by another through the embedded injector (SQLite stores, an
// in-process delivery service on SQLite), next to the engine's raw
// Encrypt + Process of the same messages in memory, measured in the same
// run. One op is one 256-byte message sent and received. With inflight=1
// the sender sends one message at a time; with inflight=16, sixteen
// goroutines send at once (an app sending from many places, or a queue
// of messages written offline). The receiver syncs after every 50 sent.
// of-raw is the fraction of the engine's in-memory rate reached, and
// cpu-x-raw the process's CPU time per message over the reference's.
func BenchmarkMessages(b *testing.B) {
	for _, inflight := range []int{1, 16} {
		b.Run(fmt.Sprintf("inflight=%d", inflight), func(b *testing.B) { benchMessages(b, inflight) })
	}
}

func benchMessages(b *testing.B, inflight int) {
	w := world.New(b, "embedded")
	alice, bob := newMember(w, "alice", nil), newMember(w, "bob", nil)
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Members: []string{bob.C.InboxID()}})
	if err != nil {
		b.Fatal(err)
	}
	bob.Sync()
	bobConv := bob.Conv(g.ID())
	payload := []byte(strings.Repeat("x", 256))
	refCPU := processCPU()
	ref := rawMessageCost(b, 200, payload)
	refCPU = (processCPU() - refCPU) / 200
	due := make(chan struct{}, 1)
	synced := make(chan error, 1)
	go func() {
		var err error
		for range due {
			if err == nil {
				err = bobConv.Sync(w.Ctx)
			}
		}
		synced <- err
	}()
	var next, sent atomic.Int64
	errs := make(chan error, inflight)
	b.ResetTimer()
	start, startCPU := time.Now(), processCPU()
	var wg sync.WaitGroup
	for range inflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if _, err := g.Send(w.Ctx, payload); err != nil {
					errs <- err
					return
				}
				if sent.Add(1)%50 == 0 {
					select {
					case due <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	wg.Wait()
	close(due)
	if err := <-synced; err != nil {
		b.Fatal(err)
	}
	if err := bobConv.Sync(w.Ctx); err != nil {
		b.Fatal(err)
	}
	per := time.Since(start) / time.Duration(b.N)
	perCPU := (processCPU() - startCPU) / time.Duration(b.N)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	ms, err := bobConv.Messages(w.Ctx, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	got := 0
	for _, m := range ms {
		if m.Kind == ports.MessageApplication && !m.Own {
			got++
		}
	}
	if got != b.N {
		b.Fatalf("bob received %d of %d messages", got, b.N)
	}
	b.ReportMetric(float64(time.Second)/float64(per), "msgs/s")
	b.ReportMetric(float64(time.Second)/float64(ref), "raw-msgs/s")
	b.ReportMetric(float64(per)/float64(ref), "x-raw")
	b.ReportMetric(float64(ref)/float64(per), "of-raw")
	// CPU of the whole process (both clients and the delivery service)
	// per message, over the reference's: what other load on the machine
	// inflates less than wall time.
	b.ReportMetric(float64(perCPU)/float64(refCPU), "cpu-x-raw")
}

// processCPU returns the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rawMessageCost returns the in-memory cost of one Encrypt by a sender
// and one Process by a receiver of the real engine.
func rawMessageCost(b *testing.B, n int, payload []byte) time.Duration {
	b.Helper()
	ctx := context.Background()
	alice, aTx := memEngine(b), newMemTx()
	bob, bTx := memEngine(b), newMemTx()
	gid := make([]byte, 32)
	_, _ = rand.Read(gid)
	aKP := memKeyPackage(b, alice.eng, alice.seed, "alice")
	if _, err := alice.eng.CreateGroup(ctx, aTx, gid, aKP, nil); err != nil {
		b.Fatal(err)
	}
	bKP := memKeyPackage(b, bob.eng, bob.seed, "bob")
	out, err := alice.eng.Commit(ctx, aTx, gid, ports.CommitOptions{Add: [][]byte{bKP.KeyPackage}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := alice.eng.MergePending(ctx, aTx, gid); err != nil {
		b.Fatal(err)
	}
	st, err := bob.eng.StageWelcome(ctx, bTx, out.Welcome, ports.KeyPackageRecord{Ref: bKP.Ref, KeyPackage: bKP.KeyPackage,
		InitPrivateKey: bKP.InitPrivateKey, EncryptionPrivateKey: bKP.EncryptionPrivateKey})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := bob.eng.InstallWelcome(ctx, bTx, st.Handle); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		msg, err := alice.eng.Encrypt(ctx, aTx, gid, payload, []byte{1})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := bob.eng.Process(ctx, bTx, gid, msg); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start) / time.Duration(n)
}

type memMember struct {
	eng  *mls.Engine
	seed []byte
}

func memEngine(b testing.TB) memMember {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	eng, err := mls.New(mls.Options{SignaturePrivateKey: priv.Seed(), PastEpochs: 2})
	if err != nil {
		b.Fatal(err)
	}
	return memMember{eng: eng, seed: priv.Seed()}
}

func memKeyPackage(b testing.TB, eng *mls.Engine, seed []byte, inbox string) ports.KeyPackageBundle {
	cred, _ := proto.Marshal(&contentspb.MlsCredential{InboxId: inbox})
	kp, err := eng.CreateKeyPackage(context.Background(), ports.KeyPackageOptions{Credential: cred, SignaturePrivateKey: seed,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		CapabilityExtensions: keypackage.CapabilityExtensions(), CapabilityProposals: keypackage.CapabilityProposals()})
	if err != nil {
		b.Fatal(err)
	}
	return kp
}

// memTx is a ports.Tx holding only blobs, in memory: what the engine
// needs, without a database.
type memTx struct{ blobs memBlobs }

func newMemTx() *memTx { return &memTx{blobs: memBlobs{}} }

func (t *memTx) Groups() ports.Groups                         { return nil }
func (t *memTx) LocalCommitLog() ports.LocalCommitLog         { return nil }
func (t *memTx) RemoteCommitLog() ports.RemoteCommitLog       { return nil }
func (t *memTx) PublishProgress() ports.PublishProgress       { return nil }
func (t *memTx) ReaderAdmission() ports.ReaderAdmission       { return nil }
func (t *memTx) KeyPackages() ports.KeyPackages               { return nil }
func (t *memTx) HeldWelcomes() ports.HeldWelcomes             { return nil }
func (t *memTx) Readds() ports.Readds                         { return nil }
func (t *memTx) ProcessedEnvelopes() ports.ProcessedEnvelopes { return nil }
func (t *memTx) IdentityCache() ports.IdentityCache           { return nil }
func (t *memTx) Blobs() ports.Blobs                           { return t.blobs }

type memBlobs map[string][]byte

func (m memBlobs) Get(_ context.Context, ns, key string) ([]byte, error) {
	v, ok := m[ns+"\x00"+key]
	if !ok {
		return nil, fmt.Errorf("blob %s/%s: %w", ns, key, ports.ErrNotFound)
	}
	return append([]byte(nil), v...), nil
}

func (m memBlobs) Put(_ context.Context, ns, key string, v []byte) error {
	m[ns+"\x00"+key] = append([]byte(nil), v...)
	return nil
}

func (m memBlobs) Delete(_ context.Context, ns, key string) error {
	delete(m, ns+"\x00"+key)
	return nil
}

func (m memBlobs) Keys(_ context.Context, ns, prefix string) ([]string, error) {
	var out []string
	for k := range m {
		if strings.HasPrefix(k, ns+"\x00"+prefix) {
			out = append(out, strings.TrimPrefix(k, ns+"\x00"))
		}
	}
	sort.Strings(out)
	return out, nil
}

// BenchmarkCommitToEveryMember measures, in a 100-member group through a
// regroupd process on SQLite over gRPC, the time from a member's commit
// (a rename) to every member having applied it, each member running its
// workers (subscription-driven). The reference, measured in the same run,
// is the engine's own in-memory work for the same commit: building it
// once and processing it 99 times on one core.
func BenchmarkCommitToEveryMember(b *testing.B) {
	const n = 100
	w := world.New(b, "sqlite")
	ms := make([]*world.Member, n)
	var others []string
	for i := range ms {
		ms[i] = newMember(w, fmt.Sprintf("m%03d", i), nil)
		if i > 0 {
			others = append(others, ms[i].C.InboxID())
		}
	}
	g, err := ms[0].C.CreateGroup(w.Ctx, client.GroupOptions{Members: others})
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range ms {
		m.Sync()
	}
	renamed := make(chan int, n*4)
	for i, m := range ms {
		if err := m.C.Start(w.Ctx); err != nil {
			b.Fatal(err)
		}
		go func(i int, m *world.Member) {
			for ev := range m.C.Events() {
				if e, ok := ev.(client.MetadataEvent); ok && bytes.Equal(e.GroupID, g.ID()) {
					renamed <- i
				}
			}
		}(i, m)
	}
	ref := rawCommitCost(b, n)
	b.ResetTimer()
	start := time.Now()
	for it := 0; it < b.N; it++ {
		if err := g.SetName(w.Ctx, fmt.Sprintf("name %d", it)); err != nil {
			b.Fatal(err)
		}
		seen := map[int]bool{}
		for len(seen) < n {
			select {
			case i := <-renamed:
				seen[i] = true
			case <-w.Ctx.Done():
				b.Fatalf("%d of %d members applied the rename", len(seen), n)
			}
		}
	}
	per := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(float64(per.Milliseconds()), "ms/commit-to-all")
	b.ReportMetric(float64(ref.Milliseconds()), "ms/raw-engine")
	b.ReportMetric(float64(per)/float64(ref), "x-raw")
}

// rawCommitCost returns the in-memory cost of one commit built by one
// member and processed and merged by n-1 others, one after the other.
func rawCommitCost(b *testing.B, n int) time.Duration {
	ctx := context.Background()
	type mem struct {
		m  memMember
		tx *memTx
	}
	gid := make([]byte, 32)
	_, _ = rand.Read(gid)
	members := make([]mem, n)
	for i := range members {
		members[i] = mem{memEngine(b), newMemTx()}
	}
	creator := members[0]
	if _, err := creator.m.eng.CreateGroup(ctx, creator.tx, gid, memKeyPackage(b, creator.m.eng, creator.m.seed, "m0"), nil); err != nil {
		b.Fatal(err)
	}
	var adds [][]byte
	bundles := make([]ports.KeyPackageBundle, n)
	for i := 1; i < n; i++ {
		bundles[i] = memKeyPackage(b, members[i].m.eng, members[i].m.seed, fmt.Sprintf("m%d", i))
		adds = append(adds, bundles[i].KeyPackage)
	}
	out, err := creator.m.eng.Commit(ctx, creator.tx, gid, ports.CommitOptions{Add: adds})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := creator.m.eng.MergePending(ctx, creator.tx, gid); err != nil {
		b.Fatal(err)
	}
	for i := 1; i < n; i++ {
		st, err := members[i].m.eng.StageWelcome(ctx, members[i].tx, out.Welcome, ports.KeyPackageRecord{Ref: bundles[i].Ref,
			KeyPackage: bundles[i].KeyPackage, InitPrivateKey: bundles[i].InitPrivateKey, EncryptionPrivateKey: bundles[i].EncryptionPrivateKey})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := members[i].m.eng.InstallWelcome(ctx, members[i].tx, st.Handle); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	c, err := creator.m.eng.Commit(ctx, creator.tx, gid, ports.CommitOptions{ForcePath: true})
	if err != nil {
		b.Fatal(err)
	}
	for i := 1; i < n; i++ {
		if _, err := members[i].m.eng.Process(ctx, members[i].tx, gid, c.Commit); err != nil {
			b.Fatal(err)
		}
		if _, err := members[i].m.eng.MergeStaged(ctx, members[i].tx, gid); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

// BenchmarkGroupInfoPerCommit measures what publishing the GroupInfo
// beside every commit adds (COMP-395): the bytes of the GroupInfo (with
// its ratchet tree) of a commit's epoch next to the bytes of the commit
// itself (a full-path update, the reference), measured in the same run,
// at 100 and 1,000 members with the real engine in memory. One op is the
// engine building the GroupInfo of the current epoch.
func BenchmarkGroupInfoPerCommit(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			ctx := context.Background()
			creator, tx := memEngine(b), newMemTx()
			gid := make([]byte, 32)
			_, _ = rand.Read(gid)
			if _, err := creator.eng.CreateGroup(ctx, tx, gid, memKeyPackage(b, creator.eng, creator.seed, "m0"), nil); err != nil {
				b.Fatal(err)
			}
			adds := make([][]byte, 0, n-1)
			for i := 1; i < n; i++ {
				m := memEngine(b)
				adds = append(adds, memKeyPackage(b, m.eng, m.seed, fmt.Sprintf("m%d", i)).KeyPackage)
			}
			if _, err := creator.eng.Commit(ctx, tx, gid, ports.CommitOptions{Add: adds}); err != nil {
				b.Fatal(err)
			}
			if _, err := creator.eng.MergePending(ctx, tx, gid); err != nil {
				b.Fatal(err)
			}
			out, err := creator.eng.Commit(ctx, tx, gid, ports.CommitOptions{ForcePath: true})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := creator.eng.MergePending(ctx, tx, gid); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := creator.eng.GroupInfo(ctx, tx, gid); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(out.GroupInfo)), "groupinfo-bytes")
			b.ReportMetric(float64(len(out.Commit)), "commit-bytes")
			b.ReportMetric(float64(len(out.GroupInfo))/float64(len(out.Commit)), "x-commit")
		})
	}
}
