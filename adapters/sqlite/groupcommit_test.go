package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/ports"
)

func openTemp(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "g.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// holdStore starts a transaction that holds the store until release is
// closed, so that the transactions started meanwhile queue behind it.
func holdStore(t *testing.T, s *sqlite.Store) (release func(), wait func()) {
	t.Helper()
	ctx := context.Background()
	held, gate := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.Tx(ctx, func(tx ports.Tx) error {
			close(held)
			<-gate
			return tx.Blobs().Put(ctx, "g", "holder", []byte("h"))
		})
	}()
	<-held
	return func() { close(gate) }, func() {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// settle waits until n transactions wait in the store's queue.
func settle(t *testing.T, s *sqlite.Store, n int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); s.Queued() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d transactions queued, want %d", s.Queued(), n)
		}
	}
}

// COMP-550: concurrent transactions of one SQLite store share a database
// transaction and its commit, and each keeps its own writes.
func TestCOMP550_ConcurrentTransactionsShareACommit(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	release, wait := holdStore(t, s)
	before := s.Commits()
	const n = 24
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.Tx(ctx, func(tx ports.Tx) error {
				return tx.Blobs().Put(ctx, "g", fmt.Sprintf("k%02d", i), []byte{byte(i)})
			})
		}()
	}
	settle(t, s, n)
	release()
	wait()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// The holder's commit, then the 24 queued behind it in one.
	if got := s.Commits() - before; got > 2 {
		t.Errorf("%d transactions made %d commits, want them to share: at most 2", n+1, got)
	}
	err := s.Tx(ctx, func(tx ports.Tx) error {
		keys, err := tx.Blobs().Keys(ctx, "g", "k")
		if err == nil && len(keys) != n {
			err = fmt.Errorf("%d keys stored, want %d", len(keys), n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// COMP-550: in a shared database transaction, a transaction whose fn
// fails, panics, exits its goroutine or whose context ends keeps none of
// its writes, and the others keep all of theirs.
func TestCOMP550_SharedCommitKeepsEachTransactionWhole(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	release, wait := holdStore(t, s)
	errBoom := errors.New("boom")
	put := func(tx ports.Tx, k string) error { return tx.Blobs().Put(ctx, "g", k, []byte(k)) }
	results := make([]error, 6)
	panicked := make(chan any, 1)
	cancelled, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	run := func(i int, f func() error) {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = f() }()
	}
	run(0, func() error { return s.Tx(ctx, func(tx ports.Tx) error { return put(tx, "ok-a") }) })
	run(1, func() error {
		return s.Tx(ctx, func(tx ports.Tx) error {
			if err := put(tx, "failed"); err != nil {
				return err
			}
			return errBoom
		})
	})
	run(2, func() error {
		defer func() { panicked <- recover() }()
		return s.Tx(ctx, func(tx ports.Tx) error {
			if err := put(tx, "panicked"); err != nil {
				return err
			}
			panic("fn panics")
		})
	})
	run(3, func() error {
		return s.Tx(cancelled, func(tx ports.Tx) error {
			cancel()
			return put(tx, "cancelled")
		})
	})
	run(4, func() error { return s.Tx(ctx, func(tx ports.Tx) error { return put(tx, "ok-b") }) })
	run(5, func() error { // as t.FailNow inside fn does
		return s.Tx(ctx, func(tx ports.Tx) error {
			if err := put(tx, "exited"); err != nil {
				return err
			}
			runtime.Goexit()
			return nil
		})
	})
	settle(t, s, len(results))
	before := s.Commits()
	release()
	wait()
	wg.Wait()
	if p := <-panicked; p != "fn panics" {
		t.Errorf("the panicking fn's caller recovered %v, want its panic", p)
	}
	if !errors.Is(results[1], errBoom) {
		t.Errorf("failing fn: Tx returned %v, want its error", results[1])
	}
	if !errors.Is(results[3], context.Canceled) {
		t.Errorf("cancelled fn: Tx returned %v, want context.Canceled", results[3])
	}
	if results[0] != nil || results[4] != nil {
		t.Errorf("healthy fns: Tx returned %v and %v", results[0], results[4])
	}
	if got := s.Commits() - before; got != 2 {
		t.Errorf("%d commits, want 2: the holder's and one shared by the rest", got)
	}
	err := s.Tx(ctx, func(tx ports.Tx) error {
		keys, err := tx.Blobs().Keys(ctx, "g", "")
		if err != nil {
			return err
		}
		if fmt.Sprint(keys) != "[holder ok-a ok-b]" {
			return fmt.Errorf("stored %v, want [holder ok-a ok-b]", keys)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
