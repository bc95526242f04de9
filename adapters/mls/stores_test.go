package mls_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/adapters/postgres"
	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/ports"
)

// storeKind opens the stores of a test: SQLite files in a directory, or
// schemas of the PostgreSQL test database.
type storeKind struct {
	name string
	open func(t testing.TB, name string) ports.Store
	// locator names the store name for a child process.
	locator func(name string) string
}

// storeKinds returns SQLite and, when REGROUP_POSTGRES_DSN is set (it
// must be under CI=true), PostgreSQL.
func storeKinds(t *testing.T) []storeKind {
	dir := t.TempDir()
	kinds := []storeKind{{
		name:    "sqlite",
		open:    func(t testing.TB, name string) ports.Store { return openSQLite(t, filepath.Join(dir, name+".db")) },
		locator: func(name string) string { return filepath.Join(dir, name+".db") },
	}}
	dsn := os.Getenv(postgres.EnvDSN)
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set; CI must run the PostgreSQL cases", postgres.EnvDSN)
		}
		t.Logf("%s is not set: the PostgreSQL cases are skipped", postgres.EnvDSN)
		return kinds
	}
	suffix := make([]byte, 5)
	_, _ = rand.Read(suffix)
	schemas := map[string]string{}
	schemaOf := func(name string) string {
		if s, ok := schemas[name]; ok {
			return s
		}
		s := "mls_" + hex.EncodeToString(suffix) + "_" + name
		schemas[name] = s
		t.Cleanup(func() { dropSchema(t, dsn, s) })
		return s
	}
	return append(kinds, storeKind{
		name:    "postgres",
		open:    func(t testing.TB, name string) ports.Store { return openPostgres(t, schemaOf(name)) },
		locator: schemaOf,
	})
}

func openSQLite(t testing.TB, path string) ports.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, &sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func openPostgres(t testing.TB, schema string) ports.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func dropSchema(t testing.TB, dsn, schema string) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Errorf("drop schema: %v", err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS "`+schema+`" CASCADE`); err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
	}
}

// storedMember is an installation whose state lives in a real store.
type storedMember struct {
	t      testing.TB
	engine *mls.Engine
	store  ports.Store
	sig    []byte
	inbox  string
}

// newStoredMember makes an installation with a fresh signature key over
// store.
func newStoredMember(t testing.TB, store ports.Store, inbox string) *storedMember {
	in := newInstallationTB(t, inbox)
	return &storedMember{t: t, engine: in.engine, store: store, sig: in.sig, inbox: inbox}
}

// another is the same installation (signature key) with another engine
// over store.
func (m *storedMember) another(store ports.Store) *storedMember {
	e, err := mls.New(mls.Options{SignaturePrivateKey: m.sig, PastEpochs: 2})
	if err != nil {
		m.t.Fatal(err)
	}
	return &storedMember{t: m.t, engine: e, store: store, sig: m.sig, inbox: m.inbox}
}

// do runs fn in one transaction and fails the test on an error.
func (m *storedMember) do(fn func(ctx context.Context, tx ports.Tx) error) {
	m.t.Helper()
	if err := m.store.Tx(context.Background(), func(tx ports.Tx) error { return fn(context.Background(), tx) }); err != nil {
		m.t.Fatal(err)
	}
}

func (m *storedMember) view(gid []byte) ports.GroupView {
	m.t.Helper()
	var v ports.GroupView
	m.do(func(ctx context.Context, tx ports.Tx) (err error) { v, err = m.engine.Group(ctx, tx, gid); return err })
	return v
}

// apply processes and merges a commit in one transaction.
func (m *storedMember) apply(gid, commit []byte) ports.GroupView {
	m.t.Helper()
	var v ports.GroupView
	m.do(func(ctx context.Context, tx ports.Tx) error {
		if _, err := m.engine.Process(ctx, tx, gid, commit); err != nil {
			return err
		}
		var err error
		v, err = m.engine.MergeStaged(ctx, tx, gid)
		return err
	})
	return v
}

// encrypt encrypts plaintext in one transaction.
func (m *storedMember) encrypt(gid []byte, plaintext string) []byte {
	m.t.Helper()
	var ct []byte
	m.do(func(ctx context.Context, tx ports.Tx) (err error) {
		ct, err = m.engine.Encrypt(ctx, tx, gid, []byte(plaintext), nil)
		return err
	})
	return ct
}

// scaledGroup makes a group of n members created by a (in memory) with m
// joined from the Welcome; the others are key packages only.
func scaledGroup(t testing.TB, gid []byte, n int, m *storedMember) *installation {
	t.Helper()
	a, welcome, rec := welcomeTo(t, gid, n, m)
	m.do(func(ctx context.Context, tx ports.Tx) error {
		st, err := m.engine.StageWelcome(ctx, tx, welcome, rec)
		if err != nil {
			return err
		}
		_, err = m.engine.InstallWelcome(ctx, tx, st.Handle)
		return err
	})
	return a
}

// commitAndMerge has a commit with a path and merge it.
func (a *installation) commitAndMerge(t testing.TB, gid []byte) ports.CommitOutput {
	t.Helper()
	ctx := context.Background()
	out, err := a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{ForcePath: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.engine.MergePending(ctx, a.tx, gid); err != nil {
		t.Fatal(err)
	}
	return out
}

// read decrypts ct at a and checks its plaintext.
func (a *installation) read(t testing.TB, gid, ct []byte, want string) {
	t.Helper()
	p, err := a.engine.Process(context.Background(), a.tx, gid, ct)
	if err != nil || string(p.Application) != want {
		t.Fatalf("a reads %q: got %q, %v", want, p.Application, err)
	}
}

var errRollbackTest = errors.New("rolled back by the test")
