package keypackage_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/adapters/deliverydb"
	"github.com/regroup-mls/regroup/adapters/grpctransport"
	"github.com/regroup-mls/regroup/adapters/hpkewrap"
	"github.com/regroup-mls/regroup/adapters/memtransport"
	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/adapters/postgres"
	"github.com/regroup-mls/regroup/adapters/pqwrap"
	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/core/algorithm"
	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/core/keypackage"
	"github.com/regroup-mls/regroup/ports"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func registry(t testing.TB) *algorithm.Registry {
	reg, err := algorithm.New(hpkewrap.NewCurve25519(), pqwrap.NewXWing())
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// pgDSN returns the PostgreSQL DSN, skipping without one (failing in CI).
func pgDSN(t testing.TB) string {
	dsn := os.Getenv(postgres.EnvDSN)
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is unset and CI=true: the PostgreSQL cases must run", postgres.EnvDSN)
		}
		t.Skipf("%s unset: set it to run the PostgreSQL cases", postgres.EnvDSN)
	}
	return dsn
}

// openClientStore opens an installation's store: a SQLite file at
// locator, or the PostgreSQL schema locator.
func openClientStore(ctx context.Context, db, locator string) (*sqlite.Store, error) {
	if db == "sqlite" {
		return sqlite.Open(ctx, locator, nil)
	}
	return postgres.Open(ctx, &postgres.Options{Schema: locator})
}

// newLocator returns a fresh locator for db, dropped (PostgreSQL) when the
// test ends.
func newLocator(t testing.TB, db string) string {
	if db == "sqlite" {
		return filepath.Join(t.TempDir(), "client.db")
	}
	pgDSN(t)
	b := make([]byte, 6)
	rand.Read(b)
	schema := "kptest_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		s, err := postgres.Open(context.Background(), &postgres.Options{Schema: schema})
		if err == nil {
			s.DB().Exec(`DROP SCHEMA IF EXISTS "` + schema + `" CASCADE`)
			s.Close()
		}
	})
	return schema
}

// newService returns a delivery service on a fresh SQLite database with
// regroupd's key-package admission (the real engine and wrappers).
func newService(t testing.TB, clk ports.Clock) *delivery.Service {
	store, err := deliverydb.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "regroupd.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	_, priv, _ := ed25519.GenerateKey(nil)
	engine, err := mls.New(mls.Options{SignaturePrivateKey: priv.Seed()})
	if err != nil {
		t.Fatal(err)
	}
	return delivery.New(store, &delivery.Options{Clock: clk,
		KeyPackageValidator: &delivery.KeyPackageAdmission{Parser: engine, Wrappers: registry(t)}})
}

// serveGRPC serves svc over gRPC on 127.0.0.1 and returns the address.
func serveGRPC(t testing.TB, svc ports.DeliveryService) string {
	return serveGRPCWith(t, svc, nil)
}

// serveGRPCWith is serveGRPC with server options.
func serveGRPCWith(t testing.TB, svc ports.DeliveryService, opts *grpctransport.ServerOptions) string {
	rpc := grpctransport.NewServer(svc, opts)
	gs := rpc.GRPCServer()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(lis)
	t.Cleanup(func() { rpc.Shutdown(); gs.Stop() })
	return lis.Addr().String()
}

// installation is one installation with its store, engine, identity and
// key-package manager, on a delivery service.
type installation struct {
	t        testing.TB
	db       string
	locator  string
	clock    *clock.Fake
	store    *sqlite.Store
	svc      ports.DeliveryService
	tr       ports.Transport
	engine   *mls.Engine
	reg      *algorithm.Registry
	id       identity.Installation
	resolver *identity.Resolver
	mgr      *keypackage.Manager
	opts     keypackage.ManagerOptions
}

// newInstallation creates an inbox on svc with a fresh installation whose
// store is of kind db, and a manager for it.
func newInstallation(t testing.TB, db string, svc ports.DeliveryService, clk *clock.Fake) *installation {
	t.Helper()
	ctx := testCtx(t)
	in := &installation{t: t, db: db, locator: newLocator(t, db), clock: clk, svc: svc, reg: registry(t)}
	var err error
	if in.store, err = openClientStore(ctx, db, in.locator); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.store.Close() })
	// The transport proves the installation key; it is known once the
	// identity exists, so the first publish goes through a bootstrap one.
	boot := memtransport.New(svc, nil)
	if in.id, err = identity.CreateInbox(ctx, identity.Options{Store: in.store, Transport: boot, Clock: clk, KeepRecoveryKey: true}); err != nil {
		t.Fatal(err)
	}
	in.tr = memtransport.New(svc, &memtransport.Options{InstallationKey: in.id.PublicKey()})
	in.setup()
	return in
}

// setup builds the engine, resolver and manager from the stored identity,
// as a restarted client does.
func (in *installation) setup() {
	t := in.t
	var err error
	if in.id, err = identity.Load(testCtx(t), in.store); err != nil {
		t.Fatal(err)
	}
	if in.engine, err = mls.New(mls.Options{SignaturePrivateKey: in.id.InstallationKey.Seed()}); err != nil {
		t.Fatal(err)
	}
	if in.resolver, err = identity.NewResolver(identity.ResolverOptions{Store: in.store, Transport: in.tr, Clock: in.clock}); err != nil {
		t.Fatal(err)
	}
	in.opts = keypackage.ManagerOptions{Store: in.store, Transport: in.tr, Engine: in.engine, Wrappers: in.reg,
		Clock: in.clock, Identity: in.resolver, Installation: in.id}
	if in.mgr, err = keypackage.NewManager(in.opts); err != nil {
		t.Fatal(err)
	}
}

// reopen closes the store and opens it again, and rebuilds everything
// from it, as a restart does.
func (in *installation) reopen() {
	in.store.Close()
	var err error
	if in.store, err = openClientStore(testCtx(in.t), in.db, in.locator); err != nil {
		in.t.Fatal(err)
	}
	in.t.Cleanup(func() { in.store.Close() })
	in.setup()
}

func (in *installation) records() []ports.KeyPackageRecord {
	var recs []ports.KeyPackageRecord
	err := in.store.Tx(testCtx(in.t), func(tx ports.Tx) error {
		var err error
		recs, err = tx.KeyPackages().List(testCtx(in.t))
		return err
	})
	if err != nil {
		in.t.Fatal(err)
	}
	return recs
}

func (in *installation) record(ref []byte) ports.KeyPackageRecord {
	var r ports.KeyPackageRecord
	err := in.store.Tx(testCtx(in.t), func(tx ports.Tx) error {
		var err error
		r, err = tx.KeyPackages().Get(testCtx(in.t), ref)
		return err
	})
	if err != nil {
		in.t.Fatal(err)
	}
	return r
}

// newest returns the key package the delivery service serves for the
// installation.
func (in *installation) newest() []byte {
	env, err := in.tr.QueryNewest(testCtx(in.t), append([]byte{byte(ports.TopicKeyPackages)}, in.id.PublicKey()...))
	if err != nil {
		in.t.Fatal(err)
	}
	return env.GetEnvelope().GetKeyPackage().GetKeyPackageTlsSerialized()
}

func hasKeys(r ports.KeyPackageRecord) bool {
	return len(r.InitPrivateKey) > 0 && len(r.EncryptionPrivateKey) > 0 && len(r.WrapperPrivateKey) > 0
}

func noKeys(r ports.KeyPackageRecord) bool {
	return len(r.InitPrivateKey) == 0 && len(r.EncryptionPrivateKey) == 0 && len(r.WrapperPrivateKey) == 0 && !r.DestroyedAt.IsZero()
}

var dbs = []string{"sqlite", "postgres"}
