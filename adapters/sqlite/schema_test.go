package sqlite_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/gormstore"
	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/ports"
)

func openPath(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestMigrationsAreVersionedAndIdempotent opens a file three times: the
// steps run once and schema_migrations records each exactly once.
func TestMigrationsAreVersionedAndIdempotent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	for i := 0; i < 3; i++ {
		s := openPath(t, path)
		var versions []int64
		if err := s.DB().Table("schema_migrations").Order("version").Pluck("version", &versions).Error; err != nil {
			t.Fatal(err)
		}
		if len(versions) != int(gormstore.SchemaVersion()) || versions[len(versions)-1] != gormstore.SchemaVersion() {
			t.Fatalf("open %d: schema_migrations holds %v, want 1..%d once each", i, versions, gormstore.SchemaVersion())
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNewerSchemaRefused opens a file a newer build migrated.
func TestNewerSchemaRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	s := openPath(t, path)
	if err := s.DB().Exec("INSERT INTO schema_migrations (version, name, applied_ns) VALUES (?, 'future', 0)", gormstore.SchemaVersion()+1).Error; err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := sqlite.Open(context.Background(), path, nil); !errors.Is(err, gormstore.ErrSchemaTooNew) {
		t.Fatalf("Open of a newer schema: %v, want ErrSchemaTooNew", err)
	}
}

func TestBadInputRefused(t *testing.T) {
	for _, p := range []string{"", "a?b", "file:x.db"} {
		if _, err := sqlite.Open(context.Background(), p, nil); !errors.Is(err, sqlite.ErrBadPath) {
			t.Errorf("Open(%q): %v, want ErrBadPath", p, err)
		}
	}
	s := openPath(t, filepath.Join(t.TempDir(), "b.db"))
	ctx := context.Background()
	for what, fn := range map[string]func(tx ports.Tx) error{
		"empty group id": func(tx ports.Tx) error { return tx.Groups().Insert(ctx, ports.Group{}) },
		"cursor above 2^63-1": func(tx ports.Tx) error {
			return tx.Groups().Insert(ctx, ports.Group{ID: []byte("g"), Cursor: math.MaxUint64})
		},
		"empty topic":          func(tx ports.Tx) error { _, err := tx.ProcessedEnvelopes().Mark(ctx, nil, 1); return err },
		"empty blob namespace": func(tx ports.Tx) error { return tx.Blobs().Put(ctx, "", "k", nil) },
		"welcome seq too big": func(tx ports.Tx) error {
			_, err := tx.HeldWelcomes().Put(ctx, ports.HeldWelcome{SequenceID: 1 << 63})
			return err
		},
	} {
		if err := s.Tx(ctx, fn); !errors.Is(err, gormstore.ErrBadRecord) {
			t.Errorf("%s: %v, want ErrBadRecord", what, err)
		}
	}
}

// TestTwoStoresOnOneFileSerializeWriters runs increments through two stores
// opened on one file, as two processes would: BEGIN IMMEDIATE and the busy
// timeout make them wait for each other instead of failing with
// SQLITE_BUSY, and no increment is lost.
func TestTwoStoresOnOneFileSerializeWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "two.db")
	a, b := openPath(t, path), openPath(t, path)
	ctx := context.Background()
	id := []byte("group-two-stores")
	if err := a.Tx(ctx, func(tx ports.Tx) error { return tx.Groups().Insert(ctx, ports.Group{ID: id}) }); err != nil {
		t.Fatal(err)
	}
	const per = 15
	var wg sync.WaitGroup
	for _, s := range []*sqlite.Store{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				err := s.Tx(ctx, func(tx ports.Tx) error {
					return tx.Groups().Update(ctx, id, func(g *ports.Group) error { g.Cursor++; return nil })
				})
				if err != nil {
					t.Errorf("increment: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	_ = b.Tx(ctx, func(tx ports.Tx) error {
		g, err := tx.Groups().Get(ctx, id)
		if err != nil || g.Cursor != 4*per {
			t.Errorf("counter = %d, %v; want %d", g.Cursor, err, 4*per)
		}
		return nil
	})
}

// TestJOIN019DestroyedKeysLeaveTheFile destroys a key package and scans
// the database file (and any WAL) for the private keys' bytes: secure
// delete overwrites them, so none survives on disk.
func TestJOIN019DestroyedKeysLeaveTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kp.db")
	s := openPath(t, path)
	ctx := context.Background()
	keys := [][]byte{
		bytes.Repeat([]byte("INIT-PRIVATE-KEY"), 2),
		bytes.Repeat([]byte("ENCR-PRIVATE-KEY"), 2),
		bytes.Repeat([]byte("WRAP-PRIVATE-KEY"), 2),
	}
	rec := ports.KeyPackageRecord{Ref: []byte("ref-1"), KeyPackage: []byte("public"), WrapperPublicKey: []byte("pub"),
		InitPrivateKey: keys[0], EncryptionPrivateKey: keys[1], WrapperPrivateKey: keys[2], CreatedAt: time.Now()}
	if err := s.Tx(ctx, func(tx ports.Tx) error { return tx.KeyPackages().Insert(ctx, rec) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Tx(ctx, func(tx ports.Tx) error { return tx.KeyPackages().Destroy(ctx, rec.Ref, time.Now()) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // the last connection checkpoints the WAL
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "kp.db*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if bytes.Contains(b, k) {
				t.Errorf("%s still contains private key %q after Destroy", filepath.Base(f), k[:16])
			}
		}
		if !bytes.Contains(b, []byte("public")) && filepath.Base(f) == "kp.db" {
			t.Errorf("the scan did not see the public part either; it proves nothing")
		}
	}
}

// TestConcurrentOpensMigrateOnce opens one new file from several
// goroutines at once: BEGIN IMMEDIATE serializes the migrations, so every
// open succeeds and each step is recorded once.
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	const n = 4
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			s, err := sqlite.Open(context.Background(), path, nil)
			if err == nil {
				err = s.Close()
			}
			errs <- err
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Errorf("concurrent open: %v", err)
		}
	}
	s := openPath(t, path)
	var steps int64
	if err := s.DB().Table("schema_migrations").Count(&steps).Error; err != nil {
		t.Fatal(err)
	}
	if steps != gormstore.SchemaVersion() {
		t.Errorf("schema_migrations holds %d rows, want %d", steps, gormstore.SchemaVersion())
	}
}

// TestWaitingTxHonoursItsContext holds one transaction open and starts a
// second with a short deadline: the second queues for the single
// connection and gives up with the context's error instead of hanging.
func TestWaitingTxHonoursItsContext(t *testing.T) {
	s := openPath(t, filepath.Join(t.TempDir(), "w.db"))
	release, held := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.Tx(context.Background(), func(tx ports.Tx) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := s.Tx(ctx, func(tx ports.Tx) error { return nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("queued Tx returned %v, want context.DeadlineExceeded", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
