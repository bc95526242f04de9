package identity_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/regroup-mls/regroup/adapters/memtransport"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/ports"
)

// spyStore counts the identity cache's calls, hides
// ports.IdentityCacheBatch when plain, and stores a record of its own
// (given by first) at the listed sequence ids just before the resolver's
// write of them, as a concurrent resolver storing first does.
type spyStore struct {
	ports.Store
	plain bool
	mu    sync.Mutex
	first map[uint64]func(ports.IdentityUpdateRecord) ports.IdentityUpdateRecord
	calls map[string]int
}

func (s *spyStore) count(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[name]++
}

// injectBefore stores, before recs are written, the record first gives
// for each of them it lists, once.
func (s *spyStore) injectBefore(ctx context.Context, c ports.IdentityCache, recs ...ports.IdentityUpdateRecord) error {
	for _, r := range recs {
		s.mu.Lock()
		f := s.first[r.SequenceID]
		delete(s.first, r.SequenceID)
		s.mu.Unlock()
		if f != nil {
			if _, err := c.Put(ctx, f(r)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *spyStore) Tx(ctx context.Context, fn func(ports.Tx) error) error {
	return s.Store.Tx(ctx, func(tx ports.Tx) error { return fn(spyTx{tx, s}) })
}

type spyTx struct {
	ports.Tx
	s *spyStore
}

func (t spyTx) IdentityCache() ports.IdentityCache {
	c := spyCache{t.Tx.IdentityCache(), t.s}
	if b, ok := c.IdentityCache.(ports.IdentityCacheBatch); ok && !t.s.plain {
		return spyBatch{c, b}
	}
	return c
}

type spyCache struct {
	ports.IdentityCache
	s *spyStore
}

func (c spyCache) Put(ctx context.Context, r ports.IdentityUpdateRecord) (bool, error) {
	c.s.count("Put")
	if err := c.s.injectBefore(ctx, c.IdentityCache, r); err != nil {
		return false, err
	}
	return c.IdentityCache.Put(ctx, r)
}

func (c spyCache) List(ctx context.Context, inbox string, through uint64) ([]ports.IdentityUpdateRecord, error) {
	c.s.count("List")
	return c.IdentityCache.List(ctx, inbox, through)
}

type spyBatch struct {
	spyCache
	b ports.IdentityCacheBatch
}

func (c spyBatch) ListMany(ctx context.Context, inboxIDs []string) ([][]ports.IdentityUpdateRecord, error) {
	c.s.count("ListMany")
	return c.b.ListMany(ctx, inboxIDs)
}

func (c spyBatch) PutMany(ctx context.Context, recs []ports.IdentityUpdateRecord) ([]bool, error) {
	c.s.count("PutMany")
	if err := c.s.injectBefore(ctx, c.IdentityCache, recs...); err != nil {
		return nil, err
	}
	return c.b.PutMany(ctx, recs)
}

// COMP-587, JOIN-051, JOIN-059: a batch resolution reads the identity
// cache with one ListMany and stores what it fetched with one PutMany
// when the cache implements ports.IdentityCacheBatch, and reads again,
// with one more ListMany, exactly the inboxes at whose sequence ids the
// store already held another record (the store keeps the first: junk
// there is ErrNotFound, the same update is the state); with a cache
// hiding the ability it makes one List per inbox and one Put per record.
// Both give the test's own folds, on SQLite and PostgreSQL.
func TestCOMP587_BatchUsesTheCacheBatchOrFallsBack(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			w := newWorld(t, db)
			mem := memtransport.New(w.svc, nil)
			var models []*inboxModel
			var reqs []ports.IdentityRequest
			for i := range 7 {
				m := newInboxModel(t)
				seq := m.add(t, mem)
				if i%2 == 1 {
					seq = m.add(t, mem)
				}
				models, reqs = append(models, m), append(reqs, ports.IdentityRequest{InboxID: m.id, SequenceID: seq})
			}
			junkAt, sameAt := reqs[0].SequenceID, reqs[1].SequenceID // inboxes 0 and 1 meet a record stored first
			for _, mode := range []string{"batch", "plain"} {
				t.Run(mode, func(t *testing.T) {
					store := w.newStore(t, db)
					// Inbox 6 is held already: the read answers it.
					warm, err := identity.NewResolver(identity.ResolverOptions{Store: store, Transport: mem, Clock: w.clock})
					if err != nil {
						t.Fatal(err)
					}
					if _, err := warm.AssociationStates(testCtx(t), reqs[6:]); err != nil {
						t.Fatal(err)
					}
					spy := &spyStore{Store: store, plain: mode == "plain", calls: map[string]int{},
						first: map[uint64]func(ports.IdentityUpdateRecord) ports.IdentityUpdateRecord{
							junkAt: func(r ports.IdentityUpdateRecord) ports.IdentityUpdateRecord {
								r.Update = []byte("junk stored first")
								return r
							},
							sameAt: func(r ports.IdentityUpdateRecord) ports.IdentityUpdateRecord { return r },
						}}
					r, err := identity.NewResolver(identity.ResolverOptions{Store: spy, Transport: mem, Clock: w.clock})
					if err != nil {
						t.Fatal(err)
					}
					res, err := r.AssociationStates(testCtx(t), reqs)
					if err != nil {
						t.Fatal(err)
					}
					if !errors.Is(res[0].Err, ports.ErrNotFound) {
						t.Errorf("JOIN-059: the inbox whose record the store held as junk = %+v, %v; want ErrNotFound", res[0].State, res[0].Err)
					}
					for i := 1; i < len(reqs); i++ {
						if want := models[i].at[reqs[i].SequenceID]; res[i].Err != nil || !same(res[i].State.InstallationKeys, want) {
							t.Errorf("JOIN-051: request %d = %x, %v; want %x", i, res[i].State.InstallationKeys, res[i].Err, want)
						}
					}
					want := map[string]int{"ListMany": 2, "PutMany": 1}
					if mode == "plain" {
						want = map[string]int{"List": len(reqs) + 2, "Put": 1 + 2 + 1 + 2 + 1 + 2}
					}
					for _, call := range []string{"List", "Put", "ListMany", "PutMany"} {
						if spy.calls[call] != want[call] {
							t.Errorf("COMP-587: %d %s calls, want %d (all calls: %v)", spy.calls[call], call, want[call], spy.calls)
						}
					}
					err = store.Tx(testCtx(t), func(tx ports.Tx) error {
						recs, err := tx.IdentityCache().List(testCtx(t), reqs[0].InboxID, math.MaxInt64)
						if err == nil && (len(recs) != 1 || !bytes.Equal(recs[0].Update, []byte("junk stored first"))) {
							t.Errorf("the cache of inbox 0 holds %+v, want only the record stored first", recs)
						}
						return err
					})
					if err != nil {
						t.Fatal(err)
					}
				})
			}
		})
	}
}
