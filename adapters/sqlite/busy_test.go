package sqlite_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/ports"
)

// TestBusyTimeoutIsConflict (COMP-119): a transaction that waits for another
// process's write lock longer than the busy timeout fails with an error
// wrapping ports.ErrConflict, as ports.Store promises for a transaction
// that lost a race and may succeed when retried; the retry, once the lock
// is released, succeeds.
func TestBusyTimeoutIsConflict(t *testing.T) {
	path := filepath.Join(t.TempDir(), "busy.db")
	ctx := context.Background()
	holder := openPath(t, path)
	waiter, err := sqlite.Open(ctx, path, &sqlite.Options{BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { waiter.Close() })
	locked, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- holder.Tx(ctx, func(tx ports.Tx) error {
			if err := tx.Blobs().Put(ctx, "busy", "k", []byte("holder")); err != nil {
				return err
			}
			close(locked)
			<-release // hold the write lock until the waiter gave up
			return nil
		})
	}()
	select {
	case <-locked:
	case err := <-done:
		t.Fatalf("holder: %v", err)
	}
	put := func(tx ports.Tx) error { return tx.Blobs().Put(ctx, "busy", "k", []byte("waiter")) }
	err = waiter.Tx(ctx, put)
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("holder: %v", err)
	}
	if !errors.Is(err, ports.ErrConflict) {
		t.Fatalf("a transaction past the busy timeout: %v, want ErrConflict", err)
	}
	if err := waiter.Tx(ctx, put); err != nil {
		t.Fatalf("retry after the lock was released: %v", err)
	}
}
