package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/ports"
)

// memStore is an in-memory ports.Store of which the engine uses Blobs: a
// transaction writes to its own overlay, kept on success and dropped on
// failure.
type memStore struct{ m map[string][]byte }

func (s *memStore) Tx(ctx context.Context, fn func(ports.Tx) error) error {
	tx := &memTx{base: s.m, over: map[string][]byte{}, gone: map[string]bool{}}
	if err := fn(tx); err != nil {
		return err
	}
	for k := range tx.gone {
		delete(s.m, k)
	}
	maps.Copy(s.m, tx.over)
	return nil
}

func (s *memStore) Close() error { return nil }

// memTx is one transaction of a memStore; only Blobs is implemented.
type memTx struct {
	ports.Tx
	base, over map[string][]byte
	gone       map[string]bool
}

func (t *memTx) Blobs() ports.Blobs { return t }

func (t *memTx) Get(_ context.Context, ns, k string) ([]byte, error) {
	key := ns + "/" + k
	if v, ok := t.over[key]; ok {
		return slices.Clone(v), nil
	}
	if v, ok := t.base[key]; ok && !t.gone[key] {
		return slices.Clone(v), nil
	}
	return nil, fmt.Errorf("%s: %w", key, ports.ErrNotFound)
}

func (t *memTx) Put(_ context.Context, ns, k string, v []byte) error {
	key := ns + "/" + k
	t.over[key] = slices.Clone(v)
	delete(t.gone, key)
	return nil
}

func (t *memTx) Delete(_ context.Context, ns, k string) error {
	key := ns + "/" + k
	delete(t.over, key)
	t.gone[key] = true
	return nil
}

func (t *memTx) Keys(_ context.Context, ns, prefix string) ([]string, error) {
	seen := map[string]bool{}
	for _, m := range []map[string][]byte{t.base, t.over} {
		for key := range m {
			if rest, ok := strings.CutPrefix(key, ns+"/"); ok && strings.HasPrefix(rest, prefix) && !(t.gone[key] && t.over[key] == nil) {
				seen[rest] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// errRollback ends a timed transaction so that the next run starts from
// the same state.
var errRollback = errors.New("rollback")

// installation is an engine with its store.
type installation struct {
	engine *mls.Engine
	store  *memStore
	sig    []byte
}

func newInstallation() (*installation, error) {
	s, err := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	if err != nil {
		return nil, err
	}
	sig, _, err := s.GenerateSignatureKey()
	if err != nil {
		return nil, err
	}
	e, err := mls.New(mls.Options{SignaturePrivateKey: sig})
	if err != nil {
		return nil, err
	}
	return &installation{engine: e, store: &memStore{m: map[string][]byte{}}, sig: sig}, nil
}

func (in *installation) keyPackage(name string) (ports.KeyPackageBundle, error) {
	return in.engine.CreateKeyPackage(context.Background(), ports.KeyPackageOptions{Credential: []byte(name), SignaturePrivateKey: in.sig,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)})
}

// do runs fn in a transaction that is kept.
func (in *installation) do(fn func(ctx context.Context, tx ports.Tx) error) error {
	return in.store.Tx(context.Background(), func(tx ports.Tx) error { return fn(context.Background(), tx) })
}

// undone runs fn in a transaction that is rolled back.
func (in *installation) undone(fn func(ctx context.Context, tx ports.Tx) error) error {
	err := in.do(func(ctx context.Context, tx ports.Tx) error {
		if err := fn(ctx, tx); err != nil {
			return err
		}
		return errRollback
	})
	if errors.Is(err, errRollback) {
		return nil
	}
	return err
}

func record(b ports.KeyPackageBundle) ports.KeyPackageRecord {
	return ports.KeyPackageRecord{Ref: b.Ref, KeyPackage: b.KeyPackage, InitPrivateKey: b.InitPrivateKey, EncryptionPrivateKey: b.EncryptionPrivateKey}
}

// join stages and installs a Welcome in one transaction.
func (in *installation) join(ctx context.Context, tx ports.Tx, welcome []byte, kp ports.KeyPackageBundle) error {
	st, err := in.engine.StageWelcome(ctx, tx, welcome, record(kp))
	if err != nil {
		return err
	}
	_, err = in.engine.InstallWelcome(ctx, tx, st.Handle)
	return err
}

// portTimes times the operations through ports.MLS in a group of n.
func portTimes(n, runs int) (map[string][]float64, error) {
	gid := []byte("peer-bench")
	a, err := newInstallation()
	if err != nil {
		return nil, err
	}
	m, err := newInstallation()
	if err != nil {
		return nil, err
	}
	mkp, err := m.keyPackage("member-1")
	if err != nil {
		return nil, err
	}
	adds := [][]byte{mkp.KeyPackage}
	for i := 2; i < n; i++ {
		other, err := newInstallation()
		if err != nil {
			return nil, err
		}
		kp, err := other.keyPackage(fmt.Sprintf("member-%d", i))
		if err != nil {
			return nil, err
		}
		adds = append(adds, kp.KeyPackage)
	}
	akp, err := a.keyPackage("member-0")
	if err != nil {
		return nil, err
	}
	var welcome []byte
	if err := a.do(func(ctx context.Context, tx ports.Tx) error {
		if _, err := a.engine.CreateGroup(ctx, tx, gid, akp, nil); err != nil {
			return err
		}
		out, err := a.engine.Commit(ctx, tx, gid, ports.CommitOptions{Add: adds})
		if err != nil {
			return err
		}
		welcome = out.Welcome
		_, err = a.engine.MergePending(ctx, tx, gid)
		return err
	}); err != nil {
		return nil, err
	}
	if err := m.do(func(ctx context.Context, tx ports.Tx) error { return m.join(ctx, tx, welcome, mkp) }); err != nil {
		return nil, err
	}
	times := map[string][]float64{}
	commitOnce := func(ctx context.Context, tx ports.Tx) (ports.CommitOutput, error) {
		return a.engine.Commit(ctx, tx, gid, ports.CommitOptions{ForcePath: true})
	}
	if times["create"], err = timeRuns(runs, func() error {
		return a.undone(func(ctx context.Context, tx ports.Tx) error { _, err := commitOnce(ctx, tx); return err })
	}); err != nil {
		return nil, err
	}
	var commit []byte
	if err := a.undone(func(ctx context.Context, tx ports.Tx) error {
		out, err := commitOnce(ctx, tx)
		commit = out.Commit
		return err
	}); err != nil {
		return nil, err
	}
	if times["process"], err = timeRuns(runs, func() error {
		return m.undone(func(ctx context.Context, tx ports.Tx) error {
			if _, err := m.engine.Process(ctx, tx, gid, commit); err != nil {
				return err
			}
			_, err := m.engine.MergeStaged(ctx, tx, gid)
			return err
		})
	}); err != nil {
		return nil, err
	}
	j, err := newInstallation()
	if err != nil {
		return nil, err
	}
	jkp, err := j.keyPackage("joiner")
	if err != nil {
		return nil, err
	}
	if err := a.undone(func(ctx context.Context, tx ports.Tx) error {
		out, err := a.engine.Commit(ctx, tx, gid, ports.CommitOptions{Add: [][]byte{jkp.KeyPackage}})
		welcome = out.Welcome
		return err
	}); err != nil {
		return nil, err
	}
	if times["join"], err = timeRuns(runs, func() error {
		return j.undone(func(ctx context.Context, tx ports.Tx) error { return j.join(ctx, tx, welcome, jkp) })
	}); err != nil {
		return nil, err
	}
	return times, nil
}
