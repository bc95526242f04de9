package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/regroup-mls/regroup/adapters/postgres"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/storetest"
)

// dsn returns the test server's DSN. Without one the test is skipped, or
// fails when CI=true, where the server is part of the run.
func dsn(t testing.TB) string {
	d := os.Getenv(postgres.EnvDSN)
	if d == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set; CI must run the PostgreSQL suite", postgres.EnvDSN)
		}
		t.Skipf("%s is not set: export it to run the PostgreSQL suite, e.g. postgres://user@127.0.0.1:5432/db?sslmode=disable", postgres.EnvDSN)
	}
	return d
}

// harness runs the suite in a fresh schema of the test database, created
// when first opened and dropped when the test ends.
type harness struct {
	t      testing.TB
	dsn    string
	schema string
	raw    int // rows RawInsert has written
}

func newHarness(t testing.TB) *harness {
	b := make([]byte, 6)
	rand.Read(b)
	h := &harness{t: t, dsn: dsn(t), schema: "storetest_" + hex.EncodeToString(b)}
	t.Cleanup(h.drop)
	return h
}

func (h *harness) drop() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, h.dsn)
	if err != nil {
		h.t.Errorf("drop schema: %v", err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS "`+h.schema+`" CASCADE`); err != nil {
		h.t.Errorf("drop schema %s: %v", h.schema, err)
	}
}

func (h *harness) Caps() storetest.Caps {
	return storetest.Caps{Reopen: true, Crash: true, Parallel: true}
}

// Locator is the schema name; the child process reads the DSN from the
// same environment variable.
func (h *harness) Locator() string { return h.schema }

func (h *harness) Open(ctx context.Context) (ports.Store, error) {
	return h.OpenLocator(ctx, h.schema)
}

func (h *harness) OpenLocator(ctx context.Context, schema string) (ports.Store, error) {
	return postgres.Open(ctx, &postgres.Options{DSN: h.dsn, Schema: schema})
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness { return newHarness(t) })
}
