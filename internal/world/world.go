// Package world runs several regroup clients on one delivery service for
// end-to-end tests: in-process on SQLite ("embedded"), or against a real
// regroupd process over gRPC, on SQLite ("sqlite") or on PostgreSQL with
// PostgreSQL client stores ("postgres"). Each member is assembled from
// the root package's providers with its MLS engine behind a
// [mlsfault.Engine], so a test can fork it for real, and its store,
// transport and clock in reach.
//
// PostgreSQL comes from REGROUP_POSTGRES_DSN (see internal/testenv):
// without it the "postgres" cases skip, and with CI=true they fail.
package world

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"path/filepath"
	"sync"
	"testing"
	"time"

	regroup "github.com/regroup-mls/regroup"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/internal/testenv"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/mlsfault"
)

// Modes are the deployments an end-to-end case can run in.
var Modes = []string{"embedded", "sqlite", "postgres"}

// Networked are the deployments that run a regroupd process.
var Networked = []string{"sqlite", "postgres"}

// World is a set of members on one delivery service.
type World struct {
	T    testing.TB
	Ctx  context.Context
	Mode string
	dir  string
	svc  *delivery.Service
	// Regroupd is the delivery service process, nil in "embedded" mode.
	Regroupd *testenv.Regroupd
	dsn      string
}

// Each runs fn as a subtest in each of the modes.
func Each(t *testing.T, modes []string, fn func(t *testing.T, w *World)) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) { fn(t, New(t, mode)) })
	}
}

// New starts the delivery service of mode, with 5 minutes for everything
// the test does. Everything it starts stops when the test ends.
func New(t testing.TB, mode string) *World { return NewFor(t, mode, 5*time.Minute) }

// NewFor is New with d for everything the test does.
func NewFor(t testing.TB, mode string, d time.Duration) *World { return NewWithFlags(t, mode, d) }

// NewWithFlags is NewFor with extra regroupd flags in the networked
// modes (a lower limit, say); the embedded mode ignores them.
func NewWithFlags(t testing.TB, mode string, d time.Duration, flags ...string) *World {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	w := &World{T: t, Ctx: ctx, Mode: mode, dir: t.TempDir()}
	switch mode {
	case "embedded":
		svc, cleanup, err := regroup.OpenEmbeddedService(ctx, filepath.Join(w.dir, "delivery.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cleanup)
		w.svc = svc
	case "sqlite":
		w.Regroupd = testenv.StartRegroupdWith(t, "sqlite", flags...)
	case "postgres":
		w.dsn = testenv.PostgresDSN(t)
		w.Regroupd = testenv.StartRegroupdWith(t, "postgres", flags...)
	default:
		t.Fatalf("unknown mode %q", mode)
	}
	return w
}

// NewOn is NewFor with the delivery service r a test started (for
// example with extra flags): mode is "sqlite" or "postgres", as r's
// database.
func NewOn(t testing.TB, mode string, r *testenv.Regroupd, d time.Duration) *World {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	w := &World{T: t, Ctx: ctx, Mode: mode, dir: t.TempDir(), Regroupd: r}
	if mode == "postgres" {
		w.dsn = testenv.PostgresDSN(t)
	}
	return w
}

// Config configures a member. The zero value makes a new inbox with the
// client's default options and the system clock.
type Config struct {
	// RecoveryKey adds the member to the inbox of this recovery key; nil
	// creates a new inbox.
	RecoveryKey ed25519.PrivateKey
	// Installation, when set, makes the member's identity in its new store
	// instead (identity.RequestInstallation and an approval, say); it is
	// not used with Injector.
	Installation func(ctx context.Context, store ports.Store, clk ports.Clock) (identity.Installation, error)
	Options      *client.Options
	Clock        ports.Clock
	// Transport, when set, wraps the member's transport (to inject
	// delivery failures).
	Transport func(ports.Transport) ports.Transport
	// MLS, when set, wraps the member's engine, outside its
	// [mlsfault.Engine] (to inject failures of the engine itself).
	MLS func(ports.MLS) ports.MLS
	// Store, when set, wraps the member's store as its client sees it (to
	// count what the client reads).
	Store func(ports.Store) ports.Store
	// Injector builds the member through the root package's injector of
	// the mode (NewEmbedded, or NewNetworked), as an app does, instead of
	// from the providers: the member then has no Engine, Store or
	// Transport in reach, and Clock and Transport above are ignored.
	Injector bool
}

// Member is one installation: its client and what the client runs on.
type Member struct {
	W      *World
	Name   string
	C      *client.Client
	Engine *mlsfault.Engine
	Store  ports.Store
	// Transport is what the client uses, Config.Transport's wrapper
	// included.
	Transport ports.Transport
	Clock     ports.Clock
	// Path is the member's SQLite file, empty on PostgreSQL.
	Path  string
	deps  client.Deps
	close func()
	// closeStore closes the store world opened for the member (nil for
	// one built by an injector, whose cleanup closes it).
	closeStore func()
}

// Member makes an installation and publishes its identity and a key
// package, so others can add it at once.
func (w *World) Member(name string, cfg Config) *Member {
	w.T.Helper()
	if cfg.Injector {
		return w.injected(name, cfg)
	}
	ctx, clk := w.Ctx, regroup.ProvideClock(cfg.Clock)
	var store ports.Store
	var cleanup func()
	var err error
	path := ""
	if w.Mode == "postgres" {
		store, cleanup, err = regroup.OpenPostgresStore(ctx, w.dsn, testenv.FreshSchema(w.T, w.dsn))
	} else {
		path = filepath.Join(w.dir, name, "client.db")
		store, cleanup, err = regroup.OpenSQLiteStore(ctx, path)
	}
	if err != nil {
		w.T.Fatalf("%s: %v", name, err)
	}
	closeStore := sync.OnceFunc(cleanup)
	w.T.Cleanup(closeStore)
	var in identity.Installation
	if cfg.Installation != nil {
		in, err = cfg.Installation(ctx, store, clk)
	} else {
		in, err = regroup.ProvideInstallation(ctx, store, clk, regroup.IdentityConfig{RecoveryKey: cfg.RecoveryKey})
	}
	if err != nil {
		w.T.Fatalf("%s: %v", name, err)
	}
	inner, err := regroup.ProvideEngine(in)
	if err != nil {
		w.T.Fatalf("%s: %v", name, err)
	}
	var tr ports.Transport
	if w.Mode == "embedded" {
		tr = regroup.ProvideMemTransport(w.svc, in)
	} else {
		var closeTr func()
		if tr, closeTr, err = regroup.DialTransport(w.Regroupd.Addr, nil, in); err != nil {
			w.T.Fatalf("%s: %v", name, err)
		}
		w.T.Cleanup(closeTr)
	}
	if cfg.Transport != nil {
		tr = cfg.Transport(tr)
	}
	id, err := regroup.ProvideResolver(store, tr, clk)
	if err != nil {
		w.T.Fatal(err)
	}
	reg, err := regroup.ProvideAlgorithms()
	if err != nil {
		w.T.Fatal(err)
	}
	eng := mlsfault.Wrap(inner)
	var mls ports.MLS = eng
	if cfg.MLS != nil {
		mls = cfg.MLS(eng)
	}
	seen := store
	if cfg.Store != nil {
		seen = cfg.Store(store)
	}
	m := &Member{W: w, Name: name, Engine: eng, Store: store, Transport: tr, Clock: clk, Path: path, closeStore: closeStore,
		deps: client.Deps{Store: seen, MLS: mls, Transport: tr, Identity: id, Clock: clk, Algorithms: reg, Installation: in}}
	m.start(cfg.Options)
	return m
}

// injected builds a member through the mode's injector.
func (w *World) injected(name string, cfg Config) *Member {
	w.T.Helper()
	id := regroup.IdentityConfig{RecoveryKey: cfg.RecoveryKey}
	m := &Member{W: w, Name: name}
	var c *client.Client
	var cleanup func()
	var err error
	switch w.Mode {
	case "embedded":
		m.Path = filepath.Join(w.dir, name, "client.db")
		c, cleanup, err = regroup.NewEmbedded(w.Ctx, regroup.EmbeddedConfig{Dir: filepath.Dir(m.Path), Service: w.svc,
			Identity: id, Options: cfg.Options})
	default:
		nc := regroup.NetworkedConfig{Server: w.Regroupd.Addr, Identity: id, Options: cfg.Options}
		if w.Mode == "postgres" {
			nc.PostgresDSN, nc.PostgresSchema = w.dsn, testenv.FreshSchema(w.T, w.dsn)
		} else {
			m.Path = filepath.Join(w.dir, name, "client.db")
			nc.SQLitePath = m.Path
		}
		c, cleanup, err = regroup.NewNetworked(w.Ctx, nc)
	}
	if err != nil {
		w.T.Fatalf("%s: %v", name, err)
	}
	m.C, m.close = c, sync.OnceFunc(cleanup)
	w.T.Cleanup(m.close)
	return m
}

// Close closes the member's client and what was built for it, its store
// included (so another process may open it); the test's end does it too,
// once.
func (m *Member) Close() {
	m.close()
	if m.closeStore != nil {
		m.closeStore()
	}
}

func (m *Member) start(opts *client.Options) {
	m.W.T.Helper()
	c, cleanup, err := regroup.ProvideClient(m.W.Ctx, m.deps, opts)
	if err != nil {
		m.W.T.Fatalf("%s: %v", m.Name, err)
	}
	m.C, m.close = c, sync.OnceFunc(cleanup)
	m.W.T.Cleanup(m.close)
}

// Restart closes the member's client and builds a new one on the same
// store, engine and transport with opts, as an app restarted with new
// options does.
func (m *Member) Restart(opts *client.Options) {
	m.W.T.Helper()
	m.close()
	m.start(opts)
}

// Sync runs one SyncAll and fails the test on error.
func (m *Member) Sync() {
	m.W.T.Helper()
	if err := m.C.SyncAll(m.W.Ctx); err != nil {
		m.W.T.Fatalf("%s: sync: %v", m.Name, err)
	}
}

// Conv returns the member's conversation, failing the test when it has
// none.
func (m *Member) Conv(id []byte) *client.Conversation {
	m.W.T.Helper()
	cv, err := m.C.Conversation(m.W.Ctx, id)
	if err != nil {
		m.W.T.Fatalf("%s: conversation %x: %v", m.Name, id, err)
	}
	return cv
}

// Info returns the member's record and metadata of the conversation.
func (m *Member) Info(id []byte) client.Info {
	m.W.T.Helper()
	info, err := m.Conv(id).Info(m.W.Ctx)
	if err != nil {
		m.W.T.Fatalf("%s: info: %v", m.Name, err)
	}
	return info
}

// ForkState returns the member's fork state of the conversation.
func (m *Member) ForkState(id []byte) ports.ForkState {
	m.W.T.Helper()
	st, err := m.Conv(id).ForkState(m.W.Ctx)
	if err != nil {
		m.W.T.Fatalf("%s: fork state: %v", m.Name, err)
	}
	return st.State
}

// Tx runs fn in one transaction of the member's store, failing the test
// on error.
func (m *Member) Tx(fn func(tx ports.Tx) error) {
	m.W.T.Helper()
	if err := m.Store.Tx(m.W.Ctx, fn); err != nil {
		m.W.T.Fatalf("%s: %v", m.Name, err)
	}
}

// SyncAll syncs every member twice, in order, so that what one member's
// pass publishes reaches every other within the call.
func SyncAll(ms ...*Member) {
	Round(ms...)
	Round(ms...)
}

// Round syncs every member once, in order.
func Round(ms ...*Member) {
	for _, m := range ms {
		m.Sync()
	}
}

// Agree fails the test unless every member holds the group active at the
// same epoch and epoch authenticator.
func Agree(t testing.TB, id []byte, ms ...*Member) {
	t.Helper()
	first := ms[0].Info(id)
	for _, m := range ms {
		got := m.Info(id)
		if !got.Active || got.Epoch != first.Epoch || !bytes.Equal(got.EpochAuthenticator, first.EpochAuthenticator) {
			t.Fatalf("%s at epoch %d (%x, active %v), %s at epoch %d (%x, active %v)", ms[0].Name, first.Epoch, short(first.EpochAuthenticator),
				first.Active, m.Name, got.Epoch, short(got.EpochAuthenticator), got.Active)
		}
	}
}

func short(b []byte) []byte {
	if len(b) > 4 {
		return b[:4]
	}
	return b
}

// WaitServing syncs m until a restarted regroupd answers, and fails t
// after 10 seconds.
func WaitServing(t testing.TB, m *Member) {
	t.Helper()
	var err error
	for i := 0; i < 100; i++ {
		if err = m.C.SyncAll(m.W.Ctx); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: regroupd not serving after the restart: %v", m.Name, err)
}
