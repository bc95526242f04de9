package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

// comparisonCases check the lookups and the state that keep a read pass
// proportional to what is new (FORK-082) and the rewind of a read
// position the topic no longer backs (COMP-100).
var comparisonCases = []testCase{
	{"FORK-082/LocalEntryByCommit", testLocalByCommit},
	{"FORK-082/AcceptedEntryByCommit", testRemoteByCommit},
	{"FORK-082/ComparisonAbsentThenReplaced", testComparison},
	{"COMP-100/RewindWithdrawsAboveBound", testRewind},
}

func testLocalByCommit(t *testing.T, h Harness) {
	s := open(t, h)
	g := gid(40)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		for _, e := range []ports.LocalCommitLogEntry{localEntry(g, 1, 5), localEntry(g, 2, 5), localEntry(g, 2, 9), localEntry(gid(41), 2, 7)} {
			if _, _, err := tx.LocalCommitLog().Append(ctx, e); err != nil {
				return err
			}
		}
		return nil
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		got, err := tx.LocalCommitLog().ByCommit(ctx, g, 2, 5)
		if err != nil {
			return err
		}
		want := localEntry(g, 2, 5)
		want.Seq = 2
		expect(t, "ByCommit(membership 2, commit 5)", got, want)
		for _, q := range []struct{ m, cs uint64 }{{1, 9}, {2, 7}, {3, 5}} {
			if _, err := tx.LocalCommitLog().ByCommit(ctx, g, q.m, q.cs); !errors.Is(err, ports.ErrNotFound) {
				t.Errorf("ByCommit(membership %d, commit %d): %v, want ErrNotFound", q.m, q.cs, err)
			}
		}
		return nil
	})
}

func testRemoteByCommit(t *testing.T, h Harness) {
	s := open(t, h)
	g := gid(42)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		dup := remoteEntry(g, 30)
		dup.CommitSequenceID = 40 // the commit of remoteEntry(g, 20), at a later envelope
		for _, e := range []ports.RemoteCommitLogEntry{remoteEntry(g, 10), dup, remoteEntry(g, 20), remoteEntry(gid(43), 25)} {
			if _, err := tx.RemoteCommitLog().Insert(ctx, e); err != nil {
				return err
			}
		}
		return nil
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		got, err := tx.RemoteCommitLog().ByCommit(ctx, g, 40)
		if err != nil {
			return err
		}
		expect(t, "ByCommit(40): the lowest envelope", got, remoteEntry(g, 20))
		if _, err := tx.RemoteCommitLog().ByCommit(ctx, g, 50); !errors.Is(err, ports.ErrNotFound) {
			t.Errorf("ByCommit of another group's commit: %v, want ErrNotFound", err)
		}
		return nil
	})
}

func testComparison(t *testing.T, h Harness) {
	s := open(t, h)
	g := gid(44)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		if _, ok, err := tx.RemoteCommitLog().Comparison(ctx, g); err != nil || ok {
			t.Errorf("comparison of a new group: ok=%v err=%v, want none", ok, err)
		}
		for _, c := range []ports.ForkComparison{{GroupID: g, Membership: 1, Shared: 4, NewestLocal: 9}, {GroupID: g, Membership: 2}} {
			if err := tx.RemoteCommitLog().PutComparison(ctx, c); err != nil {
				return err
			}
		}
		return tx.RemoteCommitLog().PutComparison(ctx, ports.ForkComparison{GroupID: gid(45), Membership: 7, Shared: 1, NewestLocal: 1})
	})
	s = reopenIfAble(t, h, s)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		c, ok, err := tx.RemoteCommitLog().Comparison(ctx, g)
		if err != nil || !ok {
			t.Fatalf("comparison after a restart (Caps.Reopen) or in the same store: ok=%v err=%v", ok, err)
		}
		expect(t, "comparison replaced", c, ports.ForkComparison{GroupID: g, Membership: 2})
		return nil
	})
}

func testRewind(t *testing.T, h Harness) {
	s := open(t, h)
	g := gid(46)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		for _, q := range []uint64{5, 12, 30, 1 << 61} {
			if _, err := tx.RemoteCommitLog().Insert(ctx, remoteEntry(g, q)); err != nil {
				return err
			}
		}
		if _, err := tx.RemoteCommitLog().Insert(ctx, remoteEntry(gid(47), 1<<60)); err != nil {
			return err
		}
		return tx.RemoteCommitLog().SetReadPosition(ctx, g, 1<<61+3)
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		pos, removed, err := tx.RemoteCommitLog().Rewind(ctx, g, 29)
		if err != nil {
			return err
		}
		if pos != 12 || removed != 2 {
			t.Errorf("Rewind(29) = position %d, %d removed; want 12 and 2", pos, removed)
		}
		return nil
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		got, err := tx.RemoteCommitLog().List(ctx, g, 0, 0)
		if err != nil {
			return err
		}
		expect(t, "accepted entries after the rewind", got, []ports.RemoteCommitLogEntry{remoteEntry(g, 5), remoteEntry(g, 12)})
		if p, err := tx.RemoteCommitLog().ReadPosition(ctx, g); err != nil || p != 12 {
			t.Errorf("read position %d %v, want 12", p, err)
		}
		other, err := tx.RemoteCommitLog().List(ctx, gid(47), 0, 0)
		if err != nil {
			return err
		}
		expect(t, "another group's entries", other, []ports.RemoteCommitLogEntry{remoteEntry(gid(47), 1<<60)})
		pos, removed, err := tx.RemoteCommitLog().Rewind(ctx, g, 1)
		if err != nil {
			return err
		}
		if pos != 0 || removed != 2 {
			t.Errorf("Rewind(1) = %d, %d; want 0 and 2", pos, removed)
		}
		return nil
	})
}
