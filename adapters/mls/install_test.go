package mls_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/ports"
)

// welcomeTo has a (in memory) create a group of n members that adds m,
// and returns a and the Welcome's key package record and bytes.
func welcomeTo(t testing.TB, gid []byte, n int, m *storedMember) (a *installation, welcome []byte, rec ports.KeyPackageRecord) {
	t.Helper()
	ctx := context.Background()
	a = newInstallationTB(t, "inbox-a")
	if _, err := a.engine.CreateGroup(ctx, a.tx, gid, a.keyPackageTB(t), nil); err != nil {
		t.Fatal(err)
	}
	kp := keyPackageOf(t, m.engine, m.sig, m.inbox)
	adds := [][]byte{kp.KeyPackage}
	for i := 2; i < n; i++ {
		adds = append(adds, newInstallationTB(t, fmt.Sprintf("inbox-%d", i)).keyPackageTB(t).KeyPackage)
	}
	out, err := a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{Add: adds})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.engine.MergePending(ctx, a.tx, gid); err != nil {
		t.Fatal(err)
	}
	return a, out.Welcome, record(kp)
}

// stage stages a Welcome at m in a transaction of its own.
func (m *storedMember) stage(welcome []byte, rec ports.KeyPackageRecord) string {
	m.t.Helper()
	var h string
	m.do(func(ctx context.Context, tx ports.Tx) error {
		st, err := m.engine.StageWelcome(ctx, tx, welcome, rec)
		h = st.Handle
		return err
	})
	return h
}

// install installs a staged Welcome at m in a transaction of its own,
// through tx wrapped by wrap when not nil.
func (m *storedMember) install(h string, wrap func(ports.Tx) ports.Tx) ports.GroupView {
	m.t.Helper()
	var v ports.GroupView
	m.do(func(ctx context.Context, tx ports.Tx) (err error) {
		if wrap != nil {
			tx = wrap(tx)
		}
		v, err = m.engine.InstallWelcome(ctx, tx, h)
		return err
	})
	return v
}

// readCounts counts the reads of staged Welcomes through a transaction:
// whole blobs (Get) and prefixes (GetPrefix).
type readCounts struct{ whole, prefix int }

// countingReads is a Blobs that counts reads in "mls.welcome" and forwards
// ports.BlobPrefixReader, as a decorator that stores the bytes it is given
// may.
type countingReads struct {
	ports.Blobs
	n *readCounts
}

func (c countingReads) Get(ctx context.Context, ns, k string) ([]byte, error) {
	if ns == "mls.welcome" {
		c.n.whole++
	}
	return c.Blobs.Get(ctx, ns, k)
}

func (c countingReads) GetPrefix(ctx context.Context, ns, k string, n int) ([]byte, error) {
	if ns == "mls.welcome" {
		c.n.prefix++
	}
	return c.Blobs.(ports.BlobPrefixReader).GetPrefix(ctx, ns, k, n)
}

type countingReadsTx struct {
	ports.Tx
	n *readCounts
}

func (t countingReadsTx) Blobs() ports.Blobs { return countingReads{t.Tx.Blobs(), t.n} }

// COMP-573: InstallWelcome on the engine that staged the Welcome reads
// only the staged blob's header (a prefix) — never the whole blob, the
// size of the tree — and installs the state the store holds: the
// installed group reads what its creator sends next.
func TestCOMP573InstallReadsOnlyTheStagedHeader(t *testing.T) {
	for _, k := range storeKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			gid := []byte("header-only")
			b := newStoredMember(t, k.open(t, "b"), "inbox-b")
			a, welcome, rec := welcomeTo(t, gid, 40, b)
			h := b.stage(welcome, rec)
			var n readCounts
			v := b.install(h, func(tx ports.Tx) ports.Tx {
				if _, ok := tx.Blobs().(ports.BlobPrefixReader); !ok {
					t.Fatalf("the %s store's Blobs do not read prefixes", k.name)
				}
				return countingReadsTx{tx, &n}
			})
			if n.whole != 0 || n.prefix == 0 {
				t.Fatalf("InstallWelcome read %d whole staged blobs and %d prefixes; want none and at least one", n.whole, n.prefix)
			}
			sameView(t, "installed", v, a.view(t, gid))
			sameView(t, "read back by an engine without a cache", b.another(b.store).view(gid), a.view(t, gid))
			a.read(t, gid, b.encrypt(gid, "after install"), "after install")
			out := a.commitAndMerge(t, gid)
			sameView(t, "after a commit", b.apply(gid, out.Commit), a.view(t, gid))
		})
	}
}

// The staged blob StageWelcome writes with its blocks encoded in place is
// the format it wrote when it encoded each block on its own and copied it
// in (the decoder accepts only encodings it writes back unchanged), and
// installs and loads as before.
func TestStagedBlobKeepsItsFormat(t *testing.T) {
	gid := []byte("format")
	b := newStoredMember(t, openSQLite(t, t.TempDir()+"/b.db"), "inbox-b")
	a, welcome, rec := welcomeTo(t, gid, 70, b)
	h := b.stage(welcome, rec)
	b.do(func(ctx context.Context, tx ports.Tx) error {
		blob, err := tx.Blobs().Get(ctx, "mls.welcome", h)
		if err != nil {
			return err
		}
		if err := mls.CheckStagedBlob(blob); err != nil {
			return fmt.Errorf("staged blob of %d bytes: %w", len(blob), err)
		}
		return nil
	})
	sameView(t, "installed by an engine that reads the blob whole", b.another(b.store).install(h, nil), a.view(t, gid))
}

// COMP-573: the header is only a key into the engine's cache. A staged
// Welcome whose cached state is gone (another engine installs it), or
// whose blob another transaction replaced after this engine staged it
// (here with the blob of another staged Welcome, of another group), is
// read whole and installs the state the store holds; so does a store
// whose Blobs cannot read a prefix.
func TestCOMP573InstallFallsBackToTheStoredBlob(t *testing.T) {
	for _, k := range storeKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			g1, g2, g3 := []byte("fallback-1"), []byte("fallback-2"), []byte("fallback-3")
			b := newStoredMember(t, k.open(t, "b"), "inbox-b")
			a1, w1, r1 := welcomeTo(t, g1, 20, b)
			a2, w2, r2 := welcomeTo(t, g2, 30, b)
			a3, w3, r3 := welcomeTo(t, g3, 25, b)
			h1, h2, h3 := b.stage(w1, r1), b.stage(w2, r2), b.stage(w3, r3)

			// Another engine, whose cache holds nothing: the whole blob.
			var n readCounts
			other := b.another(b.store)
			v := other.install(h1, func(tx ports.Tx) ports.Tx { return countingReadsTx{tx, &n} })
			if n.whole == 0 {
				t.Fatal("an engine that never saw the staged Welcome installed it without reading it")
			}
			sameView(t, "installed by another engine", v, a1.view(t, g1))

			// Another transaction puts the blob staged under h3 under h2:
			// b's cache holds h2's own state, which the store no longer
			// shows; b must install group 3.
			b.do(func(ctx context.Context, tx ports.Tx) error {
				blob, err := tx.Blobs().Get(ctx, "mls.welcome", h3)
				if err != nil {
					return err
				}
				return tx.Blobs().Put(ctx, "mls.welcome", h2, blob)
			})
			v = b.install(h2, nil)
			if !bytes.Equal(v.GroupID, g3) {
				t.Fatalf("installed group %q from a blob that holds group %q", v.GroupID, g3)
			}
			sameView(t, "installed from the replaced blob", v, a3.view(t, g3))
			a3.read(t, g3, b.encrypt(g3, "after the replaced blob"), "after the replaced blob")

			// A store whose Blobs cannot read a prefix: the whole blob.
			h2 = b.stage(w2, r2) // its blob went with group 3's install
			n = readCounts{}
			v = b.install(h2, func(tx ports.Tx) ports.Tx { return hiddenPrefixTx{countingReadsTx{tx, &n}} })
			if n.whole == 0 || n.prefix != 0 {
				t.Fatalf("through Blobs without prefixes: %d whole reads, %d prefix reads", n.whole, n.prefix)
			}
			sameView(t, "installed without prefix reads", v, a2.view(t, g2))
		})
	}
}

// hiddenPrefixTx hands out Blobs without ports.BlobPrefixReader, as a
// decorator that does not forward it does.
type hiddenPrefixTx struct{ ports.Tx }

func (t hiddenPrefixTx) Blobs() ports.Blobs { return struct{ ports.Blobs }{t.Tx.Blobs()} }

// A staged Welcome replaced within a transaction that then rolls back —
// discarded and staged again, which writes a new tag and puts the new
// write's state in the cache — leaves the first write in the store: the
// install reads that write's header and installs its state, and the
// engine goes on from there with its creator.
func TestCOMP573RolledBackRestageIsNeverInstalled(t *testing.T) {
	for _, k := range storeKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			gid := []byte("restaged")
			b := newStoredMember(t, k.open(t, "b"), "inbox-b")
			a, welcome, rec := welcomeTo(t, gid, 20, b)
			h := b.stage(welcome, rec)
			var first []byte
			b.do(func(ctx context.Context, tx ports.Tx) (err error) {
				first, err = tx.Blobs().Get(ctx, "mls.welcome", h)
				return err
			})
			err := b.store.Tx(context.Background(), func(tx ports.Tx) error {
				ctx := context.Background()
				if err := b.engine.DiscardWelcome(ctx, tx, h); err != nil {
					return err
				}
				if _, err := b.engine.StageWelcome(ctx, tx, welcome, rec); err != nil {
					return err
				}
				return errRollbackTest
			})
			if !errors.Is(err, errRollbackTest) {
				t.Fatal(err)
			}
			var n readCounts
			v := b.install(h, func(tx ports.Tx) ports.Tx { return countingReadsTx{tx, &n} })
			if n.whole != 0 {
				t.Fatalf("the first write is still cached, yet InstallWelcome read %d whole blobs", n.whole)
			}
			sameView(t, "installed", v, a.view(t, gid))
			var head []byte
			b.do(func(ctx context.Context, tx ports.Tx) (err error) {
				head, err = tx.Blobs().Get(ctx, "mls.group", fmt.Sprintf("%x", gid))
				return err
			})
			if !bytes.Equal(head[1:17], first[1:17]) {
				t.Fatalf("the installed state was written under tag %x, the stored staged Welcome's is %x", head[1:17], first[1:17])
			}
			a.read(t, gid, b.encrypt(gid, "after install"), "after install")
		})
	}
}
