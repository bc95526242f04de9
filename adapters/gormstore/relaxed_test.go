package gormstore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/regroup-mls/regroup/adapters/gormstore"
	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/ports"
)

// COMP-551: on SQLite a relaxed transaction runs with synchronous NORMAL
// (its commit writes the WAL without syncing it) and every transaction
// after it again with FULL, the store's durable default; a relaxed
// transaction's writes are kept like any other's.
func TestCOMP551_SQLiteRelaxedCommitThenFullAgain(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "r.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	level := func(relaxed bool) int {
		t.Helper()
		var n int
		run := s.Tx
		if relaxed {
			run = s.TxRelaxed
		}
		err := run(ctx, func(tx ports.Tx) (err error) {
			if n, err = gormstore.SQLiteSyncLevel(ctx, tx); err != nil {
				return err
			}
			return tx.Blobs().Put(ctx, "r", "k", []byte{byte(n)})
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got := level(false); got != 2 {
		t.Fatalf("synchronous %d in a transaction, want 2 (FULL)", got)
	}
	if got := level(true); got != 1 {
		t.Errorf("synchronous %d in a relaxed transaction, want 1 (NORMAL)", got)
	}
	if got := level(false); got != 2 {
		t.Errorf("synchronous %d in the transaction after a relaxed one, want 2 (FULL)", got)
	}
	err = s.Tx(ctx, func(tx ports.Tx) error {
		v, err := tx.Blobs().Get(ctx, "r", "k")
		if err == nil && v[0] != 2 {
			t.Errorf("stored %d, want the last transaction's write", v[0])
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
