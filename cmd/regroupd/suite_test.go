package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/adapters/deliverydb"
	"github.com/regroup-mls/regroup/adapters/memtransport"
	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/transporttest"
)

// testLimit is the envelope size limit the suite's services run with.
const testLimit = 64 << 10

// openStore opens a fresh store on db ("sqlite" or "postgres"). PostgreSQL
// needs REGROUP_POSTGRES_DSN: without it the test skips, and fails when
// CI=true. Each PostgreSQL store gets a fresh schema, dropped afterwards.
func openTestStore(t *testing.T, db string) (*deliverydb.Store, func() *deliverydb.Store) {
	t.Helper()
	ctx := context.Background()
	switch db {
	case "sqlite":
		path := filepath.Join(t.TempDir(), "regroupd.db")
		open := func() *deliverydb.Store {
			s, err := deliverydb.OpenSQLite(ctx, path, nil)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		return open(), open
	default:
		dsn := os.Getenv("REGROUP_POSTGRES_DSN")
		if dsn == "" {
			if os.Getenv("CI") == "true" {
				t.Fatal("REGROUP_POSTGRES_DSN is unset and CI=true: the PostgreSQL suite must run in CI")
			}
			t.Skip("REGROUP_POSTGRES_DSN unset: set it to a PostgreSQL DSN to run the suite on PostgreSQL")
		}
		schema := deliverydb.FreshSchemaName()
		open := func() *deliverydb.Store {
			s, err := deliverydb.OpenPostgres(ctx, dsn, &deliverydb.Options{Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		s := open()
		t.Cleanup(func() {
			if d := open(); d != nil {
				d.DropSchema(ctx)
				d.Close()
			}
		})
		return s, open
	}
}

type memHarness struct{ svc *delivery.Service }

func (h *memHarness) Caps() transporttest.Caps {
	return transporttest.Caps{MaxEnvelopeBytes: testLimit}
}
func (h *memHarness) NewTransport(*testing.T) ports.Transport { return memtransport.New(h.svc, nil) }
func (h *memHarness) NewAnonymousTransport(*testing.T) ports.Transport {
	return memtransport.New(h.svc, &memtransport.Options{Anonymous: true})
}
func (h *memHarness) Bounce(t *testing.T) { t.Fatal("memtransport has no connection to break") }

func TestMemTransport(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			store, _ := openTestStore(t, db)
			t.Cleanup(func() { store.Close() })
			h := &memHarness{svc: delivery.New(store, &delivery.Options{Clock: clock.System{}, MaxEnvelopeBytes: testLimit})}
			transporttest.Run(t, func(*testing.T) transporttest.Harness { return h })
		})
	}
}
