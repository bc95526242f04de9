package gormstore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/regroup-mls/regroup/adapters/gormstore"
	"github.com/regroup-mls/regroup/adapters/postgres"
	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/internal/testenv"
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

// COMP-553: on PostgreSQL a relaxed transaction commits with
// synchronous_commit off, set for that transaction only: the one after
// it runs with the server's setting again.
func TestCOMP553_PostgresRelaxedCommitIsAsynchronous(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	ctx := context.Background()
	s, err := postgres.Open(ctx, &postgres.Options{DSN: dsn, Schema: testenv.FreshSchema(t, dsn)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	setting := func(relaxed bool) string {
		t.Helper()
		var v string
		run := s.Tx
		if relaxed {
			run = s.TxRelaxed
		}
		err := run(ctx, func(tx ports.Tx) (err error) {
			if v, err = gormstore.Setting(ctx, tx, "synchronous_commit"); err != nil {
				return err
			}
			return tx.Blobs().Put(ctx, "r", "k", []byte(v))
		})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	server := setting(false)
	if got := setting(true); got != "off" {
		t.Errorf("synchronous_commit %q in a relaxed transaction, want off", got)
	}
	if got := setting(false); got != server {
		t.Errorf("synchronous_commit %q in the transaction after a relaxed one, want the server's %q", got, server)
	}
}
