package mls_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/ports"
)

// sameView fails unless two views describe the same epoch of the group.
func sameView(t *testing.T, step string, got, want ports.GroupView) {
	t.Helper()
	if got.Epoch != want.Epoch || !bytes.Equal(got.EpochAuthenticator, want.EpochAuthenticator) || !bytes.Equal(got.TreeHash, want.TreeHash) ||
		len(got.Members) != len(want.Members) {
		t.Fatalf("%s: epoch %d (%d members), want epoch %d (%d members)", step, got.Epoch, len(got.Members), want.Epoch, len(want.Members))
	}
}

// JOIN-046: a transaction that processed and merged a commit, and wrote
// an application message's ratchet step, then failed, leaves no trace —
// also in the engine that ran it and keeps decoded states: its next
// transaction sees the state before, as an engine without a cache does,
// and goes on from there (the commit merges, the sender's next message
// reads, b's own next message uses a key a can open).
func TestJOIN046RolledBackWriteIsNeverServed(t *testing.T) {
	for _, k := range storeKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			gid := []byte("rolled-back")
			b := newStoredMember(t, k.open(t, "b"), "inbox-b")
			a := scaledGroup(t, gid, 40, b)
			before := b.view(gid)
			out := a.commitAndMerge(t, gid)
			ct, err := a.engine.Encrypt(context.Background(), a.tx, gid, []byte("at epoch 2"), nil)
			if err != nil {
				t.Fatal(err)
			}
			err = b.store.Tx(context.Background(), func(tx ports.Tx) error {
				ctx := context.Background()
				if _, err := b.engine.Process(ctx, tx, gid, out.Commit); err != nil {
					return err
				}
				if _, err := b.engine.MergeStaged(ctx, tx, gid); err != nil {
					return err
				}
				if _, err := b.engine.Encrypt(ctx, tx, gid, []byte("never sent"), nil); err != nil {
					return err
				}
				return errRollbackTest
			})
			if !errors.Is(err, errRollbackTest) {
				t.Fatal(err)
			}
			sameView(t, "after the rollback", b.view(gid), before)
			sameView(t, "an engine without a cache", b.another(b.store).view(gid), before)
			sameView(t, "merged again", b.apply(gid, out.Commit), a.view(t, gid))
			b.do(func(ctx context.Context, tx ports.Tx) error {
				p, err := b.engine.Process(ctx, tx, gid, ct)
				if err != nil || string(p.Application) != "at epoch 2" {
					return fmt.Errorf("message at epoch 2: %q %v", p.Application, err)
				}
				return nil
			})
			a.read(t, gid, b.encrypt(gid, "b after the rollback"), "b after the rollback")
		})
	}
}

// Two Engine values of one installation, each over its own handle on the
// same database (as two processes would be), take turns: each sees what
// the other committed although it kept decoded states from before — it
// processes the next commit on top of the other's, and their application
// messages use distinct keys, which a reads all.
func TestCacheFollowsWritesOfOtherEngines(t *testing.T) {
	for _, k := range storeKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			gid := []byte("two-engines")
			b1 := newStoredMember(t, k.open(t, "b"), "inbox-b")
			a := scaledGroup(t, gid, 40, b1)
			b2 := b1.another(k.open(t, "b")) // a second handle on b's database
			same := b1.another(b1.store)     // a second engine on the same handle
			for _, m := range []*storedMember{b1, b2, same} {
				m.view(gid) // every engine keeps the state of epoch 1
			}
			for i, m := range []*storedMember{b1, b2, same, b2, b1} {
				out := a.commitAndMerge(t, gid)
				sameView(t, fmt.Sprintf("commit %d", i), m.apply(gid, out.Commit), a.view(t, gid))
				for j, w := range []*storedMember{b1, b2, same} {
					msg := fmt.Sprintf("engine %d after commit %d", j, i)
					a.read(t, gid, w.encrypt(gid, msg), msg)
				}
			}
		})
	}
}

// Transactions that run at the same time on one group — each encrypting
// with an engine that keeps decoded states, two engines sharing the
// store — never use one key twice: on PostgreSQL the server aborts the
// losers, which the store retries; a reads every message once.
func TestConcurrentTransactionsNeverReuseAKey(t *testing.T) {
	for _, k := range storeKinds(t) {
		t.Run(k.name, func(t *testing.T) {
			gid := []byte("concurrent")
			b := newStoredMember(t, k.open(t, "b"), "inbox-b")
			a := scaledGroup(t, gid, 20, b)
			engines := []*storedMember{b, b.another(b.store)}
			const workers, each = 4, 6
			var mu sync.Mutex
			sent := map[string][]byte{}
			attempts := 0
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := range workers {
				m := engines[w%len(engines)]
				wg.Go(func() {
					for i := range each {
						msg := fmt.Sprintf("worker %d message %d", w, i)
						var ct []byte
						err := m.store.Tx(context.Background(), func(tx ports.Tx) (err error) {
							mu.Lock()
							attempts++
							mu.Unlock()
							ct, err = m.engine.Encrypt(context.Background(), tx, gid, []byte(msg), nil)
							return err
						})
						if err != nil {
							errs <- err
							return
						}
						mu.Lock()
						sent[msg] = ct
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			t.Logf("%d transactions, %d attempts", workers*each, attempts)
			for msg, ct := range sent {
				a.read(t, gid, ct, msg)
			}
		})
	}
}

// A transaction the store runs again after a serialization failure
// (PostgreSQL, SERIALIZABLE) reads the state of its own snapshot first —
// which a concurrent transaction then changes and commits. Its first
// attempt must encrypt with the state of that snapshot (so with the key
// the concurrent transaction used: a, having read the concurrent message,
// cannot open it) and is aborted; the retried attempt must use the state
// the concurrent transaction left, not the first attempt's: a reads it,
// and the next message.
func TestRetriedTransactionUsesTheCommittedState(t *testing.T) {
	var pg *storeKind
	for _, k := range storeKinds(t) {
		if k.name == "postgres" {
			pg = &k
		}
	}
	if pg == nil {
		t.Skip("needs PostgreSQL, whose SERIALIZABLE transactions abort and retry")
	}
	gid := []byte("retried")
	b := newStoredMember(t, pg.open(t, "b"), "inbox-b")
	a := scaledGroup(t, gid, 20, b)
	ctx := context.Background()
	attempts := 0
	var concurrent, first, retried []byte
	err := b.store.Tx(ctx, func(tx ports.Tx) error {
		attempts++
		if _, err := b.engine.Group(ctx, tx, gid); err != nil { // takes the snapshot
			return err
		}
		if attempts == 1 {
			concurrent = b.encrypt(gid, "concurrent")
		}
		ct, err := b.engine.Encrypt(ctx, tx, gid, []byte("retried"), nil)
		if attempts == 1 {
			first = ct
		}
		retried = ct
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if attempts < 2 {
		t.Fatalf("the transaction ran %d times; the test needs a serialization failure", attempts)
	}
	a.read(t, gid, concurrent, "concurrent")
	if _, err := a.engine.Process(ctx, a.tx, gid, first); !errors.Is(err, ports.ErrUndecryptable) {
		t.Fatalf("the aborted attempt did not encrypt with its snapshot's key: %v", err)
	}
	a.read(t, gid, retried, "retried")
	a.read(t, gid, b.encrypt(gid, "after"), "after")
}

// view reads a's view of the group.
func (a *installation) view(t testing.TB, gid []byte) ports.GroupView {
	t.Helper()
	v, err := a.engine.Group(context.Background(), a.tx, gid)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var _ = mls.DefaultCacheBytes
