package regroup_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	regroup "github.com/regroup-mls/regroup"
	"github.com/regroup-mls/regroup/internal/testenv"
)

// Two clients on one store would both advance one MLS state and fork the
// installation: while NewEmbedded's client runs, a second NewEmbedded on
// the same directory, and a NewNetworked on its client.db, fail with
// ErrStoreInUse before touching anything; once the first is closed the
// store opens again. The store is owner-only.
func TestStoreLockTwoClientsOnOneStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	svc, closeSvc, err := regroup.OpenEmbeddedService(ctx, filepath.Join(dir, "delivery.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeSvc()
	home := filepath.Join(dir, "alice")
	c, cleanup, err := regroup.NewEmbedded(ctx, regroup.EmbeddedConfig{Dir: home, Service: svc})
	if err != nil {
		t.Fatal(err)
	}
	inbox := c.InboxID()
	if _, _, err := regroup.NewEmbedded(ctx, regroup.EmbeddedConfig{Dir: home, Service: svc}); !errors.Is(err, regroup.ErrStoreInUse) {
		t.Fatalf("a second NewEmbedded on one directory: %v, want ErrStoreInUse", err)
	}
	_, _, err = regroup.NewNetworked(ctx, regroup.NetworkedConfig{Server: "127.0.0.1:1", SQLitePath: filepath.Join(home, "client.db")})
	if !errors.Is(err, regroup.ErrStoreInUse) {
		t.Fatalf("NewNetworked on an open store: %v, want ErrStoreInUse", err)
	}
	for path, want := range map[string]os.FileMode{home: 0o700, filepath.Join(home, "client.db"): 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v %v, want mode %o", path, fi.Mode().Perm(), err, want)
		}
	}
	cleanup()
	c2, cleanup2, err := regroup.NewEmbedded(ctx, regroup.EmbeddedConfig{Dir: home, Service: svc})
	if err != nil {
		t.Fatalf("NewEmbedded after the first client closed: %v", err)
	}
	defer cleanup2()
	if c2.InboxID() != inbox {
		t.Fatalf("reopened store has inbox %s, want %s", c2.InboxID(), inbox)
	}
}

// The PostgreSQL store's lock: a second open of one schema fails with
// ErrStoreInUse, another schema opens, and closing frees the first.
func TestStoreLockPostgres(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b := testenv.FreshSchema(t, dsn), testenv.FreshSchema(t, dsn)
	_, closeA, err := regroup.OpenPostgresStore(ctx, dsn, a)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := regroup.OpenPostgresStore(ctx, dsn, a); !errors.Is(err, regroup.ErrStoreInUse) {
		t.Fatalf("a second open of schema %s: %v, want ErrStoreInUse", a, err)
	}
	_, closeB, err := regroup.OpenPostgresStore(ctx, dsn, b)
	if err != nil {
		t.Fatalf("another schema: %v", err)
	}
	closeB()
	closeA()
	_, closeA2, err := regroup.OpenPostgresStore(ctx, dsn, a)
	if err != nil {
		t.Fatalf("reopen after close: %v", err)
	}
	closeA2()
}
