package identity_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/adapters/deliverydb"
	"github.com/regroup-mls/regroup/adapters/grpctransport"
	"github.com/regroup-mls/regroup/adapters/postgres"
	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/identitypb"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

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

func schema(t testing.TB) string {
	b := make([]byte, 6)
	rand.Read(b)
	return "idtest_" + hex.EncodeToString(b)
}

// world is regroupd (its database of kind db, served over gRPC on
// 127.0.0.1) and a client store of the same kind.
type world struct {
	svc   *delivery.Service
	addr  string
	store ports.Store
	clock *clock.Fake
}

func newWorld(t *testing.T, db string) *world {
	ctx := testCtx(t)
	w := &world{clock: clock.NewFake(t0)}
	var es *deliverydb.Store
	var err error
	if db == "sqlite" {
		es, err = deliverydb.OpenSQLite(ctx, filepath.Join(t.TempDir(), "regroupd.db"), nil)
	} else {
		es, err = deliverydb.OpenPostgres(ctx, pgDSN(t), &deliverydb.Options{Schema: deliverydb.FreshSchemaName()})
		if err == nil {
			t.Cleanup(func() { es.DropSchema(context.Background()) })
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { es.Close() })
	w.store = w.newStore(t, db)
	w.svc = delivery.New(es, &delivery.Options{Clock: w.clock})
	rpc := grpctransport.NewServer(w.svc, nil)
	gs := rpc.GRPCServer()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(lis)
	t.Cleanup(func() { rpc.Shutdown(); gs.Stop() })
	w.addr = lis.Addr().String()
	return w
}

// newStore opens a fresh client store of kind db, closed when the test
// ends.
func (w *world) newStore(t *testing.T, db string) ports.Store {
	ctx := testCtx(t)
	if db == "sqlite" {
		s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "client.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	dsn, cs := pgDSN(t), schema(t)
	ps, err := postgres.Open(ctx, &postgres.Options{DSN: dsn, Schema: cs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ps.DB().Exec(`DROP SCHEMA IF EXISTS "` + cs + `" CASCADE`); ps.Close() })
	return ps
}

// resolverOn returns a resolver with its cache in store.
func (w *world) resolverOn(t *testing.T, store ports.Store) *identity.Resolver {
	r, err := identity.NewResolver(identity.ResolverOptions{Store: store, Transport: w.dial(t, nil), Clock: w.clock, RetryWindow: time.Second, RetryInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (w *world) dial(t *testing.T, key ed25519.PrivateKey) ports.Transport {
	c, err := grpctransport.Dial(w.addr, &grpctransport.ClientOptions{InstallationKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (w *world) resolver(t *testing.T, tr ports.Transport, window time.Duration) *identity.Resolver {
	r, err := identity.NewResolver(identity.ResolverOptions{Store: w.store, Transport: tr, Clock: w.clock, RetryWindow: window, RetryInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func keysOf(st ports.AssociationState) [][]byte { return st.InstallationKeys }

func same(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// Identity against regroupd over gRPC, on SQLite and PostgreSQL: an inbox
// is created, a second installation added and the first revoked; the
// identity survives a reopen of the store; association state at each
// update's sequence id is the fold of the updates up to it (COMP-071); a
// resolver with an empty cache fetches before it answers (JOIN-051); a
// sequence id with no update is ErrNotFound once a later update is seen
// (JOIN-059); Newest answers from what is held only (JOIN-095).
func TestIdentityOverGRPC(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			w := newWorld(t, db)
			ctx := testCtx(t)
			tr := w.dial(t, nil)
			opts := identity.Options{Store: w.store, Transport: w.dialAnyKey(t), Clock: w.clock}
			first, err := identity.CreateInbox(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			loaded, err := identity.Load(ctx, w.store)
			if err != nil || loaded.InboxID != first.InboxID || !bytes.Equal(loaded.InstallationKey, first.InstallationKey) ||
				!bytes.Equal(loaded.RecoveryPublicKey, first.RecoveryPublicKey) {
				t.Fatalf("Load = %+v, %v", loaded.InboxID, err)
			}
			if first.RecoveryKey == nil || loaded.RecoveryKey != nil || loaded.RecoveryKeyStored {
				t.Fatalf("COMP-261: CreateInbox handed out recovery key %v; Load holds %v (stored %v), want it handed out and not stored",
					first.RecoveryKey != nil, loaded.RecoveryKey != nil, loaded.RecoveryKeyStored)
			}
			// A second device of the same inbox, given the recovery key.
			u, _ := identity.NewAdd(first.RecoveryKey, mustKey(t), w.clock.Now().UnixNano())
			addSeq := publish(t, w.dialAnyKey(t), u)
			revokeSeq, err := identity.Revoke(ctx, opts, first.RecoveryKey, first.PublicKey())
			if err != nil || revokeSeq <= addSeq {
				t.Fatalf("Revoke = %d, %v (add at %d)", revokeSeq, err, addSeq)
			}
			r := w.resolver(t, tr, 5*time.Second)
			if _, err := r.Newest(ctx, first.InboxID); !errors.Is(err, ports.ErrNotFound) {
				t.Fatalf("JOIN-095: Newest before any fetch = %v, want ErrNotFound (nothing held)", err)
			}
			firstSeq := firstSequence(t, tr, first.InboxID)
			st, err := r.AssociationState(ctx, first.InboxID, addSeq)
			if err != nil || !same(keysOf(st), [][]byte{first.PublicKey(), u.GetAddInstallation().GetInstallationKey()}) {
				t.Fatalf("JOIN-051: state at the second add = %x, %v", keysOf(st), err)
			}
			if st, err := r.AssociationState(ctx, first.InboxID, firstSeq); err != nil || !same(keysOf(st), [][]byte{first.PublicKey()}) {
				t.Fatalf("state at the first add = %x, %v", keysOf(st), err)
			}
			if st, err := r.AssociationState(ctx, first.InboxID, revokeSeq); err != nil || !same(keysOf(st), [][]byte{u.GetAddInstallation().GetInstallationKey()}) {
				t.Fatalf("state after the revocation = %x, %v", keysOf(st), err)
			}
			if _, err := r.AssociationState(ctx, first.InboxID, firstSeq+1); firstSeq+1 < addSeq && !errors.Is(err, ports.ErrNotFound) {
				t.Fatalf("JOIN-059: a sequence id with no update = %v, want ErrNotFound", err)
			}
			if n, err := r.Newest(ctx, first.InboxID); err != nil || n.SequenceID != revokeSeq || len(n.InstallationKeys) != 1 {
				t.Fatalf("JOIN-095: Newest = %+v, %v", n, err)
			}
		})
	}
}

func (w *world) dialAnyKey(t *testing.T) ports.Transport { return w.dial(t, mustKey(t)) }

func mustKey(t *testing.T) ed25519.PrivateKey {
	_, k, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func publish(t *testing.T, tr ports.Transport, u *identitypb.IdentityUpdate) uint64 {
	topic, _ := identity.Topic(u.GetInboxId())
	ids, err := tr.Publish(testCtx(t), []*backendpb.ClientEnvelope{{TargetTopic: topic,
		Payload: &backendpb.ClientEnvelope_IdentityUpdate{IdentityUpdate: u}}})
	if err != nil {
		t.Fatal(err)
	}
	return ids[0]
}

func firstSequence(t *testing.T, tr ports.Transport, inbox string) uint64 {
	topic, _ := identity.Topic(inbox)
	envs, err := tr.Query(testCtx(t), topic, 0, 1)
	if err != nil || len(envs) != 1 {
		t.Fatalf("first identity update: %v", err)
	}
	return envs[0].GetSequenceId()
}
