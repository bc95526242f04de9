package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/jackc/pgx/v5"

	regroup "github.com/regroup-mls/regroup"
	"github.com/regroup-mls/regroup/adapters/deliverydb"
	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/mlsfault"
)

// demoWorld is the delivery service the demo's members share and
// everything opened for them, closed in reverse order by close.
type demoWorld struct {
	cfg demoConfig
	dir string
	// svc is the in-process delivery service; nil with --server.
	svc *delivery.Service
	// schemas are the PostgreSQL schemas created, dropped by close.
	schemas []string
	closers []func()
}

// demoMember is one installation of the demo: its client, the MLS engine
// behind the fault decorator, and its store, to read its readd status.
type demoMember struct {
	name   string
	c      *client.Client
	engine *mlsfault.Engine
	store  ports.Store
}

// demoOpenWorld opens the delivery service cfg selects: in process on a
// SQLite file in a temporary directory (the default) or on PostgreSQL, or
// none with --server, where every member dials the running regroupd.
func demoOpenWorld(ctx context.Context, cfg demoConfig) (*demoWorld, error) {
	dir, err := os.MkdirTemp("", "regroup-demo-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory: %w", err)
	}
	w := &demoWorld{cfg: cfg, dir: dir}
	w.closers = append(w.closers, func() { _ = os.RemoveAll(dir) })
	switch {
	case cfg.server != "":
		return w, nil
	case cfg.postgres != "":
		err = w.openPostgresService(ctx)
	default:
		var closeSvc func()
		w.svc, closeSvc, err = regroup.OpenEmbeddedService(ctx, filepath.Join(dir, "delivery.db"), nil)
		if err == nil {
			w.closers = append(w.closers, closeSvc)
		}
	}
	if err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

// openPostgresService opens an in-process delivery service on a fresh
// schema of the PostgreSQL database, dropped when the demo ends. It admits
// key packages as regroupd does (JOIN-090).
func (w *demoWorld) openPostgresService(ctx context.Context) error {
	schema := deliverydb.FreshSchemaName()
	st, err := deliverydb.OpenPostgres(ctx, w.cfg.postgres, &deliverydb.Options{Schema: schema})
	if err != nil {
		return fmt.Errorf("delivery service on PostgreSQL: %w", err)
	}
	w.schemas = append(w.schemas, schema)
	w.closers = append(w.closers, func() { _ = st.Close() })
	reg, err := regroup.ProvideAlgorithms()
	if err != nil {
		return err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader) // the parser signs nothing; it needs a key to exist
	if err != nil {
		return err
	}
	parser, err := mls.New(mls.Options{SignaturePrivateKey: priv.Seed()})
	if err != nil {
		return err
	}
	w.svc = delivery.New(st, &delivery.Options{Clock: regroup.ProvideClock(nil),
		KeyPackageValidator: &delivery.KeyPackageAdmission{Parser: parser, Wrappers: reg}})
	return nil
}

// close closes every member and what was opened, drops the PostgreSQL
// schemas and removes the temporary directory.
func (w *demoWorld) close() {
	for i := len(w.closers) - 1; i >= 0; i-- {
		w.closers[i]()
	}
	w.closers = nil
	if len(w.schemas) == 0 {
		return
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, w.cfg.postgres)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	for _, s := range w.schemas {
		_, _ = conn.Exec(ctx, `DROP SCHEMA IF EXISTS "`+s+`" CASCADE`)
	}
}

// member assembles an installation from the root package's providers, as
// an app without wire does, with its MLS engine behind the fault
// decorator. A new inbox is created and its key package published.
func (w *demoWorld) member(ctx context.Context, name string, opts *client.Options) (*demoMember, error) {
	store, closeStore, err := w.openStore(ctx, name)
	if err != nil {
		return nil, err
	}
	w.closers = append(w.closers, closeStore)
	clk := regroup.ProvideClock(nil)
	in, err := regroup.ProvideInstallation(ctx, store, clk, regroup.IdentityConfig{})
	if err != nil {
		return nil, err
	}
	var tr ports.Transport
	if w.svc != nil {
		tr = regroup.ProvideMemTransport(w.svc, in)
	} else {
		var closeTr func()
		if tr, closeTr, err = regroup.DialTransport(w.cfg.server, nil, in); err != nil {
			return nil, fmt.Errorf("dial %s: %w", w.cfg.server, err)
		}
		w.closers = append(w.closers, closeTr)
	}
	c, eng, closeClient, err := faultableClient(ctx, store, in, tr, clk, opts)
	if err != nil {
		return nil, err
	}
	w.closers = append(w.closers, sync.OnceFunc(closeClient))
	return &demoMember{name: name, c: c, engine: eng, store: store}, nil
}

// openStore opens the member's store: a SQLite file in the temporary
// directory, or a fresh schema of the PostgreSQL database with --postgres.
func (w *demoWorld) openStore(ctx context.Context, name string) (ports.Store, func(), error) {
	if w.cfg.postgres == "" {
		return regroup.OpenSQLiteStore(ctx, filepath.Join(w.dir, name, "client.db"))
	}
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return nil, nil, err
	}
	schema := "regroup_demo_" + hex.EncodeToString(b)
	st, closeStore, err := regroup.OpenPostgresStore(ctx, w.cfg.postgres, schema)
	if err != nil {
		return nil, nil, fmt.Errorf("store on PostgreSQL: %w", err)
	}
	w.schemas = append(w.schemas, schema)
	return st, closeStore, nil
}

// readdStatus returns the member's stored readd status of key in the
// conversation; the zero status when none is stored.
func (m *demoMember) readdStatus(ctx context.Context, groupID, key []byte) (ports.ReaddStatus, error) {
	var st ports.ReaddStatus
	err := m.store.Tx(ctx, func(tx ports.Tx) error {
		s, err := tx.Readds().Get(ctx, groupID, key)
		if errors.Is(err, ports.ErrNotFound) {
			return nil
		}
		st = s
		return err
	})
	return st, err
}
