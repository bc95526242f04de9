package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/regroup-mls/regroup/adapters/postgres"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/storetest"
)

// RawInsert is the reference of the benchmarks: one plain INSERT in its
// own transaction (at the server's default isolation), through
// database/sql on the store's own pool and schema.
func (h *harness) RawInsert(ctx context.Context, s ports.Store) error {
	st, ok := s.(*postgres.Store)
	if !ok {
		return fmt.Errorf("raw insert: store is %T", s)
	}
	db, err := st.DB().DB()
	if err != nil {
		return err
	}
	if h.raw == 0 {
		if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS bench_raw (id BIGINT PRIMARY KEY, v BYTEA NOT NULL)"); err != nil {
			return err
		}
	}
	h.raw++
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO bench_raw (id, v) VALUES ($1, $2)", h.raw, []byte("0123456789abcdef")); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) storetest.Harness { return newHarness(b) })
}
