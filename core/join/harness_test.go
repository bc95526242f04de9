package join_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/adapters/aead"
	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/adapters/deliverydb"
	"github.com/regroup-mls/regroup/adapters/hpkewrap"
	"github.com/regroup-mls/regroup/adapters/memtransport"
	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/adapters/postgres"
	"github.com/regroup-mls/regroup/adapters/pqwrap"
	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/core/algorithm"
	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/core/join"
	"github.com/regroup-mls/regroup/core/keypackage"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// The harness drives the receiver with the real pieces: a delivery
// service on SQLite with regroupd's key-package admission, installations
// whose identities and key packages are published to it, the MLS engine,
// the wrappers and the pointee AEAD. An adder builds its groups with the
// engine directly, so a test can shape every field of a Welcome.

var protocolVersion = metadata.Version{Major: 1, Minor: 6, Patch: 0}

func testCtx(t testing.TB) context.Context {
	limit := 3 * time.Minute
	if _, ok := t.(*testing.B); ok {
		limit = 30 * time.Minute // a benchmark's world at 10,000 members on a loaded machine
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	t.Cleanup(cancel)
	return ctx
}

func builtinRegistry(t testing.TB) *algorithm.Registry {
	reg, err := algorithm.New(hpkewrap.NewCurve25519(), pqwrap.NewXWing(), aead.NewChaCha20Poly1305())
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

var dbs = []string{"sqlite", "postgres"}

func pgDSN(t testing.TB) {
	if os.Getenv(postgres.EnvDSN) == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is unset and CI=true: the PostgreSQL cases must run", postgres.EnvDSN)
		}
		t.Skipf("%s unset: set it to run the PostgreSQL cases", postgres.EnvDSN)
	}
}

// openStore opens a client store: a SQLite file, or a PostgreSQL schema.
func openStore(ctx context.Context, db, locator string) (*sqlite.Store, error) {
	if db == "sqlite" {
		return sqlite.Open(ctx, locator, nil)
	}
	return postgres.Open(ctx, &postgres.Options{Schema: locator})
}

func newLocator(t testing.TB, db string) string {
	if db == "sqlite" {
		return filepath.Join(t.TempDir(), "client.db")
	}
	pgDSN(t)
	b := make([]byte, 6)
	rand.Read(b)
	schema := "jointest_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		s, err := postgres.Open(context.Background(), &postgres.Options{Schema: schema})
		if err == nil {
			s.DB().Exec(`DROP SCHEMA IF EXISTS "` + schema + `" CASCADE`)
			s.Close()
		}
	})
	return schema
}

type world struct {
	t     testing.TB
	ctx   context.Context
	clock *clock.Fake
	svc   *delivery.Service
	db    string
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newWorld(t testing.TB, db string) *world {
	t.Helper()
	return newWorldWith(t, db, delivery.Options{})
}

// newWorldWith is newWorld with the service's options: opts with the
// world's clock and key-package admission set.
func newWorldWith(t testing.TB, db string, opts delivery.Options) *world {
	t.Helper()
	if db == "postgres" {
		pgDSN(t)
	}
	clk := clock.NewFake(t0)
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
	opts.Clock, opts.KeyPackageValidator = clk, &delivery.KeyPackageAdmission{Parser: engine, Wrappers: builtinRegistry(t)}
	svc := delivery.New(store, &opts)
	return &world{t: t, ctx: testCtx(t), clock: clk, svc: svc, db: db}
}

// instOptions shape an installation.
type instOptions struct {
	// Wrapper of its key package; zero is X-Wing.
	Wrapper ports.WrapperAlgorithmID
	// Registry replaces the built-in algorithms (a plugin host's).
	Registry *algorithm.Registry
	// Recovery adds the installation to that inbox instead of a new one.
	Recovery ed25519.PrivateKey
	// MLS wraps the engine the receiver uses (a test double of one rule).
	MLS func(*mls.Engine) ports.MLS
	// NoKeyPackage skips publishing a key package.
	NoKeyPackage bool
	// OnOneshot is the receiver's one-shot hook.
	OnOneshot func(context.Context, join.Oneshot) error
	// Transport wraps the transport the receiver reads Welcomes with.
	Transport func(in *inst, tr ports.Transport) ports.Transport
	// Version is the receiver's protocol version; zero is 1.6.0.
	Version metadata.Version
	// NoCatchUp leaves the receiver without a CatchUp hook.
	NoCatchUp bool
	// Identity wraps the resolver the receiver checks membership with.
	Identity func(ports.Identity) ports.Identity
	// MaxHeld and MaxRejected bound the receiver's queue and records.
	MaxHeld, MaxRejected int
	// MaxHeldPerSender bounds a sender class's held Welcomes.
	MaxHeldPerSender int
	// IdentityTimeout bounds each identity lookup.
	IdentityTimeout time.Duration
}

// inst is one installation: store, identity, engine, key packages and a
// receiver. It follows its groups' topics as a client would (catchUp).
type inst struct {
	w       *world
	name    string
	opts    instOptions
	locator string
	store   *sqlite.Store
	id      identity.Installation
	tr      ports.Transport
	eng     *mls.Engine
	reg     *algorithm.Registry
	res     *identity.Resolver
	mgr     *keypackage.Manager
	log     *commitlog.Log
	rcv     *join.Receiver

	mu       sync.Mutex
	failures int // group-topic messages catchUp could not process
	joined   []join.Joined
	outcomes []join.Outcome
	oneshots []join.Oneshot
}

func (w *world) newInst(name string, o instOptions) *inst {
	w.t.Helper()
	in := &inst{w: w, name: name, opts: o, locator: newLocator(w.t, w.db)}
	var err error
	if in.store, err = openStore(w.ctx, w.db, in.locator); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { in.store.Close() })
	boot := memtransport.New(w.svc, nil)
	// The store keeps the recovery key: tests add and revoke with it.
	iopts := identity.Options{Store: in.store, Transport: boot, Clock: w.clock, KeepRecoveryKey: true}
	if o.Recovery != nil {
		in.id, err = identity.AddInstallation(w.ctx, iopts, o.Recovery)
	} else {
		in.id, err = identity.CreateInbox(w.ctx, iopts)
	}
	if err != nil {
		w.t.Fatalf("%s: identity: %v", name, err)
	}
	in.setup()
	if !o.NoKeyPackage {
		if _, err := in.mgr.Publish(w.ctx); err != nil {
			w.t.Fatalf("%s: key package: %v", name, err)
		}
	}
	return in
}

// setup builds everything but the store from the stored identity, as a
// process start does.
func (in *inst) setup() {
	t, w := in.w.t, in.w
	var err error
	if in.id, err = identity.Load(w.ctx, in.store); err != nil {
		t.Fatal(err)
	}
	in.tr = memtransport.New(w.svc, &memtransport.Options{InstallationKey: in.id.PublicKey()})
	if in.eng, err = mls.New(mls.Options{SignaturePrivateKey: in.id.InstallationKey.Seed()}); err != nil {
		t.Fatal(err)
	}
	in.reg = in.opts.Registry
	if in.reg == nil {
		in.reg = builtinRegistry(t)
	}
	if in.res, err = identity.NewResolver(identity.ResolverOptions{Store: in.store, Transport: in.tr, Clock: w.clock}); err != nil {
		t.Fatal(err)
	}
	in.mgr, err = keypackage.NewManager(keypackage.ManagerOptions{Store: in.store, Transport: in.tr, Engine: in.eng, Wrappers: in.reg,
		Clock: w.clock, Identity: in.res, Installation: in.id, WrapperAlgorithm: in.opts.Wrapper})
	if err != nil {
		t.Fatal(err)
	}
	if in.log, err = commitlog.New(commitlog.Options{Enabled: true, Store: in.store, Transport: in.tr, Clock: w.clock,
		Views: in.eng, InstallationKey: in.id.InstallationKey}); err != nil {
		t.Fatal(err)
	}
	var engine ports.MLS = in.eng
	if in.opts.MLS != nil {
		engine = in.opts.MLS(in.eng)
	}
	var tr ports.Transport = in.tr
	if in.opts.Transport != nil {
		tr = in.opts.Transport(in, in.tr)
	}
	version := in.opts.Version
	if version == (metadata.Version{}) {
		version = protocolVersion
	}
	var ident ports.Identity = in.res
	if in.opts.Identity != nil {
		ident = in.opts.Identity(in.res)
	}
	catchUp := in.catchUp
	if in.opts.NoCatchUp {
		catchUp = nil
	}
	in.rcv, err = join.NewReceiver(join.ReceiverOptions{Store: in.store, MLS: engine, Transport: tr, Clock: w.clock,
		Algorithms: in.reg, Installation: in.id, Identity: ident, ProtocolVersion: version, Log: in.log,
		MaxHeld: in.opts.MaxHeld, MaxRejected: in.opts.MaxRejected, MaxHeldPerSender: in.opts.MaxHeldPerSender,
		IdentityTimeout: in.opts.IdentityTimeout,
		CatchUp:         catchUp, WelcomeAccepted: in.mgr.WelcomeAccepted, OnOneshot: in.opts.OnOneshot,
		OnJoined:  func(j join.Joined) { in.mu.Lock(); in.joined = append(in.joined, j); in.mu.Unlock() },
		OnWelcome: func(o join.Outcome) { in.mu.Lock(); in.outcomes = append(in.outcomes, o); in.mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (in *inst) reopen() {
	in.store.Close()
	var err error
	if in.store, err = openStore(in.w.ctx, in.w.db, in.locator); err != nil {
		in.w.t.Fatal(err)
	}
	in.w.t.Cleanup(func() { in.store.Close() })
	in.setup()
}

func (in *inst) inbox() string { return in.id.InboxID }
func (in *inst) key() []byte   { return in.id.PublicKey() }

// process runs the receiver over the welcome topic.
func (in *inst) process() {
	in.w.t.Helper()
	if err := in.rcv.Process(in.w.ctx); err != nil {
		in.w.t.Fatalf("%s: process welcomes: %v", in.name, err)
	}
}

func (in *inst) retry() {
	in.w.t.Helper()
	if err := in.rcv.RetryHeld(in.w.ctx); err != nil {
		in.w.t.Fatalf("%s: retry held welcomes: %v", in.name, err)
	}
}

func (in *inst) tx(fn func(ctx context.Context, tx ports.Tx) error) {
	in.w.t.Helper()
	if err := in.store.Tx(in.w.ctx, func(tx ports.Tx) error { return fn(in.w.ctx, tx) }); err != nil {
		in.w.t.Fatalf("%s: %v", in.name, err)
	}
}

// group returns the stored group record, ok false when there is none.
func (in *inst) group(gid []byte) (g ports.Group, ok bool) {
	in.w.t.Helper()
	in.tx(func(ctx context.Context, tx ports.Tx) error {
		var err error
		g, err = tx.Groups().Get(ctx, gid)
		if errors.Is(err, ports.ErrNotFound) {
			return nil
		}
		ok = err == nil
		return err
	})
	return g, ok
}

func (in *inst) view(gid []byte) (v ports.GroupView, ok bool) {
	in.w.t.Helper()
	in.tx(func(ctx context.Context, tx ports.Tx) error {
		var err error
		v, err = in.eng.Group(ctx, tx, gid)
		if errors.Is(err, ports.ErrGroupNotFound) {
			return nil
		}
		ok = err == nil
		return err
	})
	return v, ok
}

// state is the outcome of the Welcome with sequence id seq: "joined",
// "held JOIN-0NN" or "rejected JOIN-0NN".
func (in *inst) state(seq uint64) string {
	in.w.t.Helper()
	rej, err := in.rcv.Rejected(in.w.ctx)
	if err != nil {
		in.w.t.Fatal(err)
	}
	for _, r := range rej {
		if r.SequenceID == seq {
			return "rejected " + r.Rule
		}
	}
	held, err := in.rcv.Held(in.w.ctx)
	if err != nil {
		in.w.t.Fatal(err)
	}
	for _, h := range held {
		if h.SequenceID == seq {
			rule, _, _ := bytes.Cut([]byte(h.Reason), []byte(":"))
			return "held " + string(rule)
		}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, j := range in.joined {
		if j.WelcomeSequenceID == seq {
			return "joined"
		}
	}
	for _, o := range in.oneshots {
		if o.WelcomeSequenceID == seq {
			return "oneshot"
		}
	}
	return "nothing"
}

func (in *inst) want(seq uint64, want string) {
	in.w.t.Helper()
	if got := in.state(seq); got != want {
		in.w.t.Fatalf("%s: welcome %d: %s, want %s", in.name, seq, got, want)
	}
}

// catchUp processes the group's topic from the stored cursor as a client
// does: commits are merged, the cursor moves, and a removal stops the
// processing with the group inactive (COMP-186).
func (in *inst) catchUp(ctx context.Context, gid []byte) error {
	for {
		var g ports.Group
		if err := in.store.Tx(ctx, func(tx ports.Tx) (err error) { g, err = tx.Groups().Get(ctx, gid); return err }); err != nil {
			return err
		}
		if !g.Active {
			return nil
		}
		envs, err := in.tr.Query(ctx, append([]byte{0}, gid...), g.Cursor, 100)
		if err != nil || len(envs) == 0 {
			return err
		}
		for _, env := range envs {
			inactive := false
			err := in.store.Tx(ctx, func(tx ports.Tx) error {
				inactive = false
				p, err := in.eng.Process(ctx, tx, gid, env.GetEnvelope().GetGroupMessage())
				if err != nil {
					in.mu.Lock()
					in.failures++
					in.mu.Unlock()
				}
				if err == nil && p.Kind == ports.ProcessedCommit {
					v, err := in.eng.MergeStaged(ctx, tx, gid)
					if err != nil {
						return err
					}
					inactive = !v.Active
				}
				return tx.Groups().Update(ctx, gid, func(gr *ports.Group) error {
					gr.Cursor, gr.Active = env.GetSequenceId(), !inactive
					return nil
				})
			})
			if err != nil {
				return err
			}
			if inactive {
				return nil
			}
		}
	}
}

// addMessage stores an application message the installation holds for
// the group (JOIN-044 checks it survives).
func (in *inst) addMessage(gid []byte, seq uint64, text string) {
	in.tx(func(ctx context.Context, tx ports.Tx) error {
		_, _, err := tx.(ports.MessageTx).Messages().Insert(ctx, ports.Message{GroupID: gid, SequenceID: seq,
			Kind: ports.MessageApplication, Content: []byte(text), SentAt: in.w.clock.Now()})
		return err
	})
}

func (in *inst) messages(gid []byte) []string {
	var out []string
	in.tx(func(ctx context.Context, tx ports.Tx) error {
		ms, err := tx.(ports.MessageTx).Messages().List(ctx, gid, 0, 0)
		for _, m := range ms {
			out = append(out, string(m.Content))
		}
		return err
	})
	return out
}

// association returns the newest identity state of the inbox as this
// installation fetches it.
func (in *inst) association(inbox string) ports.AssociationState {
	in.w.t.Helper()
	if err := in.res.Sync(in.w.ctx, inbox); err != nil {
		in.w.t.Fatal(err)
	}
	st, err := in.res.Newest(in.w.ctx, inbox)
	if err != nil {
		in.w.t.Fatal(err)
	}
	return st
}

// validated fetches and validates the newest key package of j.
func (in *inst) validated(j *inst) keypackage.Validated {
	in.w.t.Helper()
	v := keypackage.Validator{Engine: in.eng, Wrappers: in.reg}
	env, err := in.tr.QueryNewest(in.w.ctx, append([]byte{byte(ports.TopicKeyPackages)}, j.key()...))
	if err != nil {
		in.w.t.Fatal(err)
	}
	kp := env.GetEnvelope().GetKeyPackage().GetKeyPackageTlsSerialized()
	val, err := v.Validate(in.w.ctx, kp, j.inbox(), j.key(), in.w.clock.Now())
	if err != nil {
		in.w.t.Fatalf("validate %s's key package: %v", j.name, err)
	}
	return val
}

func recipientOf(v keypackage.Validated) join.Recipient {
	return join.Recipient{InstallationKey: v.InstallationKey, Wrapper: v.WrapperAlgorithm,
		WrapperPublicKey: v.WrapperPublicKey, PointeeAEADs: v.PointeeAEADs}
}

func (in *inst) publish(envs ...*backendpb.ClientEnvelope) []uint64 {
	in.w.t.Helper()
	seqs, err := in.tr.Publish(in.w.ctx, envs)
	if err != nil {
		in.w.t.Fatalf("%s: publish: %v", in.name, err)
	}
	return seqs
}

func mustMarshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

var _ = fmt.Sprintf
