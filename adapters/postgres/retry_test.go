package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/regroup-mls/regroup/adapters/gormstore"
	"github.com/regroup-mls/regroup/adapters/postgres"
	"github.com/regroup-mls/regroup/ports"
)

func openStore(t *testing.T, maxAttempts int) ports.Store {
	h := newHarness(t)
	s, err := postgres.Open(context.Background(), &postgres.Options{DSN: h.dsn, Schema: h.schema, MaxAttempts: maxAttempts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestSerializationFailureIsRetried interleaves two transactions so that
// the first one's update meets a row the second changed after the first's
// snapshot: the server aborts it with 40001 and Tx runs it again.
func TestSerializationFailureIsRetried(t *testing.T) {
	s := openStore(t, 5)
	ctx := context.Background()
	id := []byte("group-retry-0001")
	if err := s.Tx(ctx, func(tx ports.Tx) error { return tx.Groups().Insert(ctx, ports.Group{ID: id}) }); err != nil {
		t.Fatal(err)
	}
	increment := func(tx ports.Tx) error {
		return tx.Groups().Update(ctx, id, func(g *ports.Group) error { g.Cursor++; return nil })
	}
	attempts := 0
	err := s.Tx(ctx, func(tx ports.Tx) error {
		attempts++
		if _, err := tx.Groups().Get(ctx, id); err != nil { // takes the snapshot
			return err
		}
		if attempts == 1 {
			if err := s.Tx(ctx, increment); err != nil { // a concurrent transaction commits
				return fmt.Errorf("concurrent increment: %w", err)
			}
		}
		return increment(tx)
	})
	if err != nil {
		t.Fatalf("Tx: %v", err)
	}
	if attempts != 2 {
		t.Errorf("fn ran %d times, want 2 (one serialization failure, one retry)", attempts)
	}
	_ = s.Tx(ctx, func(tx ports.Tx) error {
		g, err := tx.Groups().Get(ctx, id)
		if err != nil || g.Cursor != 2 {
			t.Errorf("counter = %d, %v; want 2", g.Cursor, err)
		}
		return nil
	})
}

// TestRetriesAreBounded has fn fail with 40001 and 40P01 every time: Tx
// stops after MaxAttempts runs with an error wrapping ErrConflict and the
// server's error.
func TestRetriesAreBounded(t *testing.T) {
	s := openStore(t, 3)
	ctx := context.Background()
	for _, code := range []string{"40001", "40P01"} {
		runs := 0
		err := s.Tx(ctx, func(tx ports.Tx) error {
			runs++
			if err := tx.Blobs().Put(ctx, "ns", "k", []byte("v")); err != nil {
				return err
			}
			return fmt.Errorf("query: %w", &pgconn.PgError{Code: code})
		})
		if !errors.Is(err, ports.ErrConflict) {
			t.Errorf("%s: Tx returned %v, want ErrConflict", code, err)
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != code {
			t.Errorf("%s: the server's error is not wrapped: %v", code, err)
		}
		if runs != 3 {
			t.Errorf("%s: fn ran %d times, want 3", code, runs)
		}
	}
	// Another SQLSTATE is not retried.
	runs := 0
	err := s.Tx(ctx, func(tx ports.Tx) error { runs++; return &pgconn.PgError{Code: "23505"} })
	if runs != 1 || errors.Is(err, ports.ErrConflict) {
		t.Errorf("23505: ran %d times, err %v; want one run and no ErrConflict", runs, err)
	}
	if err := s.Tx(ctx, func(tx ports.Tx) error {
		_, err := tx.Blobs().Get(ctx, "ns", "k")
		if !errors.Is(err, ports.ErrNotFound) {
			t.Errorf("a retried transaction left its write: %v", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestOpenErrors(t *testing.T) {
	t.Setenv(postgres.EnvDSN, "")
	if _, err := postgres.Open(context.Background(), nil); !errors.Is(err, postgres.ErrNoDSN) {
		t.Errorf("Open without a DSN: %v, want ErrNoDSN", err)
	}
	for _, bad := range []string{`x"; DROP SCHEMA public; --`, "Upper", "1abc"} {
		_, err := postgres.Open(context.Background(), &postgres.Options{DSN: "postgres://127.0.0.1:1/x", Schema: bad})
		if !errors.Is(err, postgres.ErrBadSchema) {
			t.Errorf("schema %q: %v, want ErrBadSchema", bad, err)
		}
	}
}

// TestConcurrentOpensMigrateOnce opens several stores on one new schema at
// once, as processes starting together do: the advisory lock lets one
// migrate and the others find the schema current.
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	h := newHarness(t)
	const n = 4
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			s, err := h.Open(context.Background())
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
	s, err := postgres.Open(context.Background(), &postgres.Options{DSN: h.dsn, Schema: h.schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var steps int64
	if err := s.DB().Table("schema_migrations").Count(&steps).Error; err != nil {
		t.Fatal(err)
	}
	if steps != gormstore.SchemaVersion() {
		t.Errorf("schema_migrations holds %d rows, want %d", steps, gormstore.SchemaVersion())
	}
}
