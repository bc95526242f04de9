package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

var logCases = []testCase{
	{"FORK-001/LocalEntryAtMostOncePerOutcome", testLocalAppendOnce},
	{"FORK-001/ConcurrentAppendsOncePerOutcome", testConcurrentAppends},
	{"FORK-021/LocalLogOrderedBySeq", testLocalOrder},
	{"FORK-077/AcceptedEntryStoredOnce", testRemoteInsertOnce},
	{"FORK-083/AcceptedEntriesOrderedByEnvelopeSeq", testRemoteOrder},
	{"FORK-083/ReadPositionNeverMovesBack", testReadPosition},
	{"FORK-088/FloorAbsentDiffersFromZero", testFloor},
	{"FORK-089/BoundaryTakesMaximum", testBoundaries},
	{"FORK-085/PublishProgressReplaced", testPublishProgress},
	{"COMP-280/CommitLogOverview", testCommitLogOverview},
}

func localEntry(g []byte, membership, commitSeq uint64) ports.LocalCommitLogEntry {
	return ports.LocalCommitLogEntry{
		GroupID: g, Membership: membership, CommitSequenceID: commitSeq,
		LastEpochAuthenticator: []byte{1, 2, 3}, CommitResult: ports.CommitResultApplied,
		AppliedEpochNumber: commitSeq + 1, AppliedEpochAuthenticator: []byte{4, 5, 6},
		ChangeClass: ports.ChangeMembership, AddedSuperAdmins: []string{"inbox-a", "inbox-b"},
		RoleEvidence: true, RecordedAt: at(int(commitSeq)),
	}
}

func testLocalAppendOnce(t *testing.T, h Harness) {
	s := open(t, h)
	g := gid(1)
	var first ports.LocalCommitLogEntry
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		e, inserted, err := tx.LocalCommitLog().Append(ctx, localEntry(g, 1, 5))
		if err != nil {
			return err
		}
		if !inserted || e.Seq != 1 {
			t.Errorf("first append: inserted=%v seq=%d, want true and 1", inserted, e.Seq)
		}
		first = e
		return nil
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		dup := localEntry(g, 1, 5)
		dup.CommitResult = ports.CommitResultInvalid // a second outcome for the same commit
		e, inserted, err := tx.LocalCommitLog().Append(ctx, dup)
		if err != nil {
			return err
		}
		if inserted {
			t.Errorf("a second entry for the same commit outcome was recorded")
		}
		expect(t, "duplicate append returns the stored entry", e, first)
		// Another membership of the same commit is a new entry.
		e, inserted, err = tx.LocalCommitLog().Append(ctx, localEntry(g, 2, 5))
		if err != nil {
			return err
		}
		if !inserted || e.Seq != 2 {
			t.Errorf("append in a new membership: inserted=%v seq=%d, want true and 2", inserted, e.Seq)
		}
		all, err := tx.LocalCommitLog().List(ctx, g, 0, 0)
		if err != nil {
			return err
		}
		if len(all) != 2 {
			t.Errorf("log holds %d entries, want 2", len(all))
		}
		return nil
	})
}

func testLocalOrder(t *testing.T, h Harness) {
	s := open(t, h)
	g, other := gid(2), gid(3)
	const n = 30
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		for i := 0; i < n; i++ {
			// Commit sequence ids deliberately out of order: Seq is recording order.
			if _, _, err := tx.LocalCommitLog().Append(ctx, localEntry(g, 1, uint64((i*7)%n+100))); err != nil {
				return err
			}
			if _, _, err := tx.LocalCommitLog().Append(ctx, localEntry(other, 1, uint64(i))); err != nil {
				return err
			}
		}
		return nil
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		all, err := tx.LocalCommitLog().List(ctx, g, 0, 0)
		if err != nil {
			return err
		}
		if len(all) != n {
			t.Fatalf("List returned %d entries, want %d", len(all), n)
		}
		for i, e := range all {
			if e.Seq != uint64(i+1) || e.CommitSequenceID != uint64((i*7)%n+100) {
				t.Errorf("entry %d: seq %d commit %d, want seq %d commit %d", i, e.Seq, e.CommitSequenceID, i+1, (i*7)%n+100)
			}
		}
		page, err := tx.LocalCommitLog().List(ctx, g, 10, 5)
		if err != nil {
			return err
		}
		if len(page) != 5 || page[0].Seq != 11 || page[4].Seq != 15 {
			t.Errorf("List(after 10, limit 5) = %d entries starting at %v", len(page), page)
		}
		last, err := tx.LocalCommitLog().Last(ctx, g)
		if err != nil {
			return err
		}
		if last.Seq != n {
			t.Errorf("Last().Seq = %d, want %d", last.Seq, n)
		}
		expect(t, "stored entry", last, func() ports.LocalCommitLogEntry {
			e := localEntry(g, 1, uint64(((n-1)*7)%n+100))
			e.Seq = n
			return e
		}())
		return nil
	})
}

func remoteEntry(g []byte, env uint64) ports.RemoteCommitLogEntry {
	return ports.RemoteCommitLogEntry{
		GroupID: g, EnvelopeSequenceID: env, CommitSequenceID: env * 2,
		LastEpochAuthenticator: []byte{9}, CommitResult: ports.CommitResultApplied,
		AppliedEpochNumber: env, AppliedEpochAuthenticator: []byte{8, 8},
		AuthorInstallationKey: []byte("author"), AcceptedAt: at(int(env)),
	}
}

func testRemoteInsertOnce(t *testing.T, h Harness) {
	s := open(t, h)
	g := gid(4)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		ins, err := tx.RemoteCommitLog().Insert(ctx, remoteEntry(g, 7))
		if err != nil || !ins {
			t.Errorf("first insert: %v %v", ins, err)
		}
		return nil
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		changed := remoteEntry(g, 7)
		changed.CommitSequenceID = 1
		ins, err := tx.RemoteCommitLog().Insert(ctx, changed)
		if err != nil {
			return err
		}
		if ins {
			t.Errorf("the same envelope was accepted twice")
		}
		got, err := tx.RemoteCommitLog().List(ctx, g, 0, 0)
		if err != nil {
			return err
		}
		expect(t, "accepted entries", got, []ports.RemoteCommitLogEntry{remoteEntry(g, 7)})
		return nil
	})
}

func testRemoteOrder(t *testing.T, h Harness) {
	s := open(t, h)
	g := gid(5)
	seqs := []uint64{40, 3, 17, 1 << 40, 8, 25}
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		for _, q := range seqs {
			if _, err := tx.RemoteCommitLog().Insert(ctx, remoteEntry(g, q)); err != nil {
				return err
			}
			if _, err := tx.RemoteCommitLog().Insert(ctx, remoteEntry(gid(6), q+1)); err != nil {
				return err
			}
		}
		return nil
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		got, err := tx.RemoteCommitLog().List(ctx, g, 8, 3)
		if err != nil {
			return err
		}
		expect(t, "List(after 8, limit 3)", got, []ports.RemoteCommitLogEntry{remoteEntry(g, 17), remoteEntry(g, 25), remoteEntry(g, 40)})
		last, err := tx.RemoteCommitLog().Last(ctx, g)
		if err != nil {
			return err
		}
		expect(t, "Last", last, remoteEntry(g, 1<<40))
		return nil
	})
}

func testReadPosition(t *testing.T, h Harness) {
	s := open(t, h)
	g := gid(7)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		p, err := tx.RemoteCommitLog().ReadPosition(ctx, g)
		if err != nil {
			return err
		}
		if p != 0 {
			t.Errorf("initial read position %d, want 0", p)
		}
		for _, q := range []uint64{5, 9, 3} {
			if err := tx.RemoteCommitLog().SetReadPosition(ctx, g, q); err != nil {
				return err
			}
		}
		return nil
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		p, err := tx.RemoteCommitLog().ReadPosition(ctx, g)
		if err != nil {
			return err
		}
		if p != 9 {
			t.Errorf("read position %d after 5, 9, 3; want 9 (never backwards)", p)
		}
		return nil
	})
}

func testFloor(t *testing.T, h Harness) {
	s := open(t, h)
	g := gid(8)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		if _, ok, err := tx.ReaderAdmission().Floor(ctx, g); err != nil || ok {
			t.Errorf("Floor of a new group: ok=%v err=%v, want absent", ok, err)
		}
		return tx.ReaderAdmission().SetFloor(ctx, g, 0)
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		f, ok, err := tx.ReaderAdmission().Floor(ctx, g)
		if err != nil || !ok || f != 0 {
			t.Errorf("Floor after SetFloor(0) = %d, %v, %v; want 0 and initialized", f, ok, err)
		}
		if err := tx.ReaderAdmission().SetFloor(ctx, g, 12); err != nil {
			return err
		}
		if f, _, _ := tx.ReaderAdmission().Floor(ctx, g); f != 12 {
			t.Errorf("Floor after SetFloor(12) = %d", f)
		}
		return nil
	})
}

func testBoundaries(t *testing.T, h Harness) {
	s := open(t, h)
	g := gid(9)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		ra := tx.ReaderAdmission()
		for _, step := range []struct {
			key string
			seq uint64
		}{{"inst-a", 5}, {"inst-a", 3}, {"inst-b", 2}, {"inst-a", 8}, {"inst-b", 2}, {"inst-a", 6}, {"inst-b", 1}} {
			// The last two are lower than the recorded boundary: a store that
			// keeps the last value instead of the maximum ends elsewhere.
			if err := ra.RaiseBoundary(ctx, g, []byte(step.key), step.seq); err != nil {
				return err
			}
		}
		got, err := ra.Boundaries(ctx, g)
		if err != nil {
			return err
		}
		expect(t, "boundaries", got, map[string]uint64{"inst-a": 8, "inst-b": 2})
		return nil
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		ra := tx.ReaderAdmission()
		if err := ra.ResetBoundaries(ctx, g, map[string]uint64{"inst-c": 4, "inst-a": 1}); err != nil {
			return err
		}
		got, err := ra.Boundaries(ctx, g)
		if err != nil {
			return err
		}
		expect(t, "boundaries after reset", got, map[string]uint64{"inst-c": 4, "inst-a": 1})
		if err := ra.ResetBoundaries(ctx, g, nil); err != nil {
			return err
		}
		got, err = ra.Boundaries(ctx, g)
		if err != nil {
			return err
		}
		expect(t, "boundaries after reset to none", got, map[string]uint64{})
		return nil
	})
}

func testPublishProgress(t *testing.T, h Harness) {
	s := open(t, h)
	g := gid(10)
	want := ports.PublishState{GroupID: g, ConfirmedThrough: 4, EligibleFrom: 2, LegacyRecovered: true, Publisher: true}
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		if err := tx.PublishProgress().Put(ctx, ports.PublishState{GroupID: g, ConfirmedThrough: 1}); err != nil {
			return err
		}
		return tx.PublishProgress().Put(ctx, want)
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		got, err := tx.PublishProgress().Get(ctx, g)
		if err != nil {
			return err
		}
		expect(t, "publish progress", got, want)
		return nil
	})
}

// testConcurrentAppends has two workers append the same commit outcomes at
// once: each is recorded once, and Seq stays 1..n without gaps or repeats.
func testConcurrentAppends(t *testing.T, h Harness) {
	const n = 20
	s := open(t, h)
	g := gid(12)
	ctx := ctxFor(t)
	var inserted atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; i <= n; i++ {
				for {
					var ins bool
					err := s.Tx(ctx, func(tx ports.Tx) error {
						_, in, err := tx.LocalCommitLog().Append(ctx, localEntry(g, 1, uint64(i)))
						ins = in
						return err
					})
					if errors.Is(err, ports.ErrConflict) {
						continue
					}
					if err != nil {
						t.Errorf("append %d: %v", i, err)
						return
					}
					if ins {
						inserted.Add(1)
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	if got := inserted.Load(); got != n {
		t.Errorf("Append reported %d insertions of %d distinct outcomes", got, n)
	}
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		all, err := tx.LocalCommitLog().List(ctx, g, 0, 0)
		if err != nil {
			return err
		}
		seen := map[uint64]bool{}
		for i, e := range all {
			if e.Seq != uint64(i+1) {
				t.Errorf("entry %d has Seq %d", i, e.Seq)
			}
			if seen[e.CommitSequenceID] {
				t.Errorf("commit %d recorded twice", e.CommitSequenceID)
			}
			seen[e.CommitSequenceID] = true
		}
		if len(all) != n {
			t.Errorf("log holds %d entries, want %d", len(all), n)
		}
		return nil
	})
}
