package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

var txCases = []testCase{
	{"PROC-008/CommitKeepsEveryWrite", testCommitKeeps},
	{"PROC-008/ErrorLeavesNothing", testErrorLeavesNothing},
	{"PROC-008/PanicLeavesNothingAndRepanics", testPanicLeavesNothing},
	{"PROC-008/CancelledContextAborts", testCancelledContext},
	{"PROC-008/ConcurrentUpdatesLoseNothing", testConcurrentUpdates},
	{"Store/ClosedRefusesTx", testClosed},
	{"Store/ErrorClasses", testErrorClasses},
	{"Store/OneMiBBlob", testLargeBlob},
	{"Store/BlobKeysByPrefixInByteOrder", testBlobKeys},
}

// writeSome writes one row through several repositories; present checks
// for them.
func writeSome(ctx context.Context, tx ports.Tx, n int) error {
	if err := tx.Groups().Insert(ctx, ports.Group{ID: gid(n), Active: true, Cursor: uint64(n)}); err != nil {
		return err
	}
	if _, _, err := tx.LocalCommitLog().Append(ctx, ports.LocalCommitLogEntry{GroupID: gid(n), Membership: 1, CommitSequenceID: 10}); err != nil {
		return err
	}
	if _, err := tx.ProcessedEnvelopes().Mark(ctx, gid(n), 1); err != nil {
		return err
	}
	return tx.Blobs().Put(ctx, "tx", fmt.Sprint(n), []byte("value"))
}

// countSome reports how many of writeSome's four rows exist.
func countSome(t testing.TB, s ports.Store, n int) int {
	t.Helper()
	found := 0
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		if _, err := tx.Groups().Get(ctx, gid(n)); err == nil {
			found++
		} else if !errors.Is(err, ports.ErrNotFound) {
			return err
		}
		if _, err := tx.LocalCommitLog().Last(ctx, gid(n)); err == nil {
			found++
		} else if !errors.Is(err, ports.ErrNotFound) {
			return err
		}
		if ok, err := tx.ProcessedEnvelopes().Has(ctx, gid(n), 1); err != nil {
			return err
		} else if ok {
			found++
		}
		if _, err := tx.Blobs().Get(ctx, "tx", fmt.Sprint(n)); err == nil {
			found++
		} else if !errors.Is(err, ports.ErrNotFound) {
			return err
		}
		return nil
	})
	return found
}

func testCommitKeeps(t *testing.T, h Harness) {
	s := open(t, h)
	must(t, s, func(ctx context.Context, tx ports.Tx) error { return writeSome(ctx, tx, 1) })
	if got := countSome(t, s, 1); got != 4 {
		t.Fatalf("after commit %d of 4 writes are visible", got)
	}
}

func testErrorLeavesNothing(t *testing.T, h Harness) {
	s := open(t, h)
	boom := errors.New("boom")
	ctx := ctxFor(t)
	err := s.Tx(ctx, func(tx ports.Tx) error {
		if err := writeSome(ctx, tx, 2); err != nil {
			return err
		}
		return fmt.Errorf("wrapped: %w", boom)
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Tx returned %v, want fn's error", err)
	}
	if got := countSome(t, s, 2); got != 0 {
		t.Fatalf("after an error %d of 4 writes were kept", got)
	}
}

func testPanicLeavesNothing(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxFor(t)
	var recovered any
	func() {
		defer func() { recovered = recover() }()
		_ = s.Tx(ctx, func(tx ports.Tx) error {
			if err := writeSome(ctx, tx, 3); err != nil {
				t.Errorf("write: %v", err)
			}
			panic("kaboom")
		})
	}()
	if recovered != "kaboom" {
		t.Fatalf("Tx did not re-panic with fn's value; recovered %v", recovered)
	}
	if got := countSome(t, s, 3); got != 0 {
		t.Fatalf("after a panic %d of 4 writes were kept", got)
	}
	// The store stays usable after the panic.
	must(t, s, func(ctx context.Context, tx ports.Tx) error { return writeSome(ctx, tx, 4) })
}

func testCancelledContext(t *testing.T, h Harness) {
	s := open(t, h)
	t.Run("BeforeTx", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := s.Tx(ctx, func(tx ports.Tx) error { return writeSome(ctx, tx, 5) })
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Tx on a cancelled context returned %v, want context.Canceled", err)
		}
		if got := countSome(t, s, 5); got != 0 {
			t.Errorf("%d writes kept", got)
		}
	})
	t.Run("DuringFn", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		err := s.Tx(ctx, func(tx ports.Tx) error {
			if err := writeSome(ctx, tx, 6); err != nil {
				return err
			}
			cancel()
			return nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Tx whose context was cancelled in fn returned %v, want context.Canceled", err)
		}
		if got := countSome(t, s, 6); got != 0 {
			t.Errorf("%d writes kept after cancellation", got)
		}
	})
}

func testConcurrentUpdates(t *testing.T, h Harness) {
	const workers, perWorker = 2, 40
	s := open(t, h)
	id := gid(7)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		return tx.Groups().Insert(ctx, ports.Group{ID: id})
	})
	ctx := ctxFor(t)
	var wg sync.WaitGroup
	errs := make(chan error, workers*perWorker)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWorker; i++ {
				for {
					err := s.Tx(ctx, func(tx ports.Tx) error {
						return tx.Groups().Update(ctx, id, func(g *ports.Group) error { g.Cursor++; return nil })
					})
					if errors.Is(err, ports.ErrConflict) {
						continue // the contract allows surfacing a retryable conflict
					}
					if err != nil {
						errs <- err
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("increment: %v", err)
	}
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		g, err := tx.Groups().Get(ctx, id)
		if err != nil {
			return err
		}
		if g.Cursor != workers*perWorker {
			t.Errorf("counter = %d after %d increments: updates were lost", g.Cursor, workers*perWorker)
		}
		return nil
	})
}

func testClosed(t *testing.T, h Harness) {
	s, err := h.Open(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	err = s.Tx(ctxFor(t), func(tx ports.Tx) error { return nil })
	if !errors.Is(err, ports.ErrClosed) {
		t.Fatalf("Tx after Close returned %v, want ErrClosed", err)
	}
}

func testErrorClasses(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := ctxFor(t)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		if err := tx.Groups().Insert(ctx, ports.Group{ID: gid(8)}); err != nil {
			return err
		}
		return tx.KeyPackages().Insert(ctx, ports.KeyPackageRecord{Ref: []byte("ref-8"), CreatedAt: at(0)})
	})
	checks := []struct {
		what string
		want error
		call func(tx ports.Tx) error
	}{
		{"Groups.Get of an absent group", ports.ErrNotFound, func(tx ports.Tx) error { _, err := tx.Groups().Get(ctx, gid(9)); return err }},
		{"Groups.Update of an absent group", ports.ErrNotFound, func(tx ports.Tx) error {
			return tx.Groups().Update(ctx, gid(9), func(*ports.Group) error { return nil })
		}},
		{"Groups.Insert of an existing id", ports.ErrAlreadyExists, func(tx ports.Tx) error { return tx.Groups().Insert(ctx, ports.Group{ID: gid(8), Active: true}) }},
		{"KeyPackages.Insert of an existing ref", ports.ErrAlreadyExists, func(tx ports.Tx) error {
			return tx.KeyPackages().Insert(ctx, ports.KeyPackageRecord{Ref: []byte("ref-8")})
		}},
		{"KeyPackages.Insert identical to the stored record (COMP-360)", ports.ErrAlreadyExists, func(tx ports.Tx) error {
			return tx.KeyPackages().Insert(ctx, ports.KeyPackageRecord{Ref: []byte("ref-8"), CreatedAt: at(0)})
		}},
		{"Groups.Insert identical to the stored group (COMP-360)", ports.ErrAlreadyExists, func(tx ports.Tx) error { return tx.Groups().Insert(ctx, ports.Group{ID: gid(8)}) }},
		{"KeyPackages.Get of an absent ref", ports.ErrNotFound, func(tx ports.Tx) error { _, err := tx.KeyPackages().Get(ctx, []byte("nope")); return err }},
		{"LocalCommitLog.Last of an empty log", ports.ErrNotFound, func(tx ports.Tx) error { _, err := tx.LocalCommitLog().Last(ctx, gid(9)); return err }},
		{"RemoteCommitLog.Last of an empty log", ports.ErrNotFound, func(tx ports.Tx) error { _, err := tx.RemoteCommitLog().Last(ctx, gid(9)); return err }},
		{"PublishProgress.Get of an absent group", ports.ErrNotFound, func(tx ports.Tx) error { _, err := tx.PublishProgress().Get(ctx, gid(9)); return err }},
		{"HeldWelcomes.Get of an absent Welcome", ports.ErrNotFound, func(tx ports.Tx) error { _, err := tx.HeldWelcomes().Get(ctx, 99); return err }},
		{"Readds.Get of an absent status", ports.ErrNotFound, func(tx ports.Tx) error { _, err := tx.Readds().Get(ctx, gid(9), []byte("i")); return err }},
		{"Blobs.Get of an absent key", ports.ErrNotFound, func(tx ports.Tx) error { _, err := tx.Blobs().Get(ctx, "ns", "nope"); return err }},
	}
	for _, c := range checks {
		err := s.Tx(ctx, func(tx ports.Tx) error { return c.call(tx) })
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want an error wrapping %v", c.what, err, c.want)
		}
	}
	// A failed insert inside fn must not poison the rest of the transaction.
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		if err := tx.Groups().Insert(ctx, ports.Group{ID: gid(8)}); !errors.Is(err, ports.ErrAlreadyExists) {
			t.Errorf("duplicate insert: %v", err)
		}
		return tx.Blobs().Put(ctx, "ns", "after-duplicate", []byte{1})
	})
}

func testLargeBlob(t *testing.T, h Harness) {
	s := open(t, h)
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i*7 + i>>8)
	}
	must(t, s, func(ctx context.Context, tx ports.Tx) error { return tx.Blobs().Put(ctx, "mls", "state", big) })
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		got, err := tx.Blobs().Get(ctx, "mls", "state")
		if err != nil {
			return err
		}
		if string(got) != string(big) {
			t.Errorf("1 MiB blob read back as %d different bytes", len(got))
		}
		return nil
	})
}

func testBlobKeys(t *testing.T, h Harness) {
	s := open(t, h)
	keys := []string{"a/2", "a/10", "a/1", "A/1", "a\xff", "a/\xff", "b/1", "a"}
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		for _, k := range keys {
			if err := tx.Blobs().Put(ctx, "ns", k, []byte(k)); err != nil {
				return err
			}
		}
		if err := tx.Blobs().Put(ctx, "other", "a/3", nil); err != nil {
			return err
		}
		if err := tx.Blobs().Put(ctx, "ns", "a/1", []byte("replaced")); err != nil {
			return err
		}
		return tx.Blobs().Delete(ctx, "ns", "b/1")
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		got, err := tx.Blobs().Keys(ctx, "ns", "a/")
		if err != nil {
			return err
		}
		expect(t, `Keys("ns", "a/") in byte order`, got, []string{"a/1", "a/10", "a/2", "a/\xff"})
		all, err := tx.Blobs().Keys(ctx, "ns", "")
		if err != nil {
			return err
		}
		expect(t, `Keys("ns", "")`, all, []string{"A/1", "a", "a/1", "a/10", "a/2", "a/\xff", "a\xff"})
		v, err := tx.Blobs().Get(ctx, "ns", "a/1")
		if err != nil {
			return err
		}
		expect(t, "replaced value", string(v), "replaced")
		return tx.Blobs().Delete(ctx, "ns", "absent")
	})
}
