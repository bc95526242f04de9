package storetest

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

// COMP-280, COMP-281: a store whose Tx implements
// [ports.CommitLogOverviewTx] returns every read position as
// ReadPosition does, and among the unconfirmed groups every group holding
// a local entry above its confirmed publish progress or entries and no
// progress, and no group whose entries are all confirmed or that has none.
func testCommitLogOverview(t *testing.T, h Harness) {
	s := open(t, h)
	var has bool
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		_, has = tx.(ports.CommitLogOverviewTx)
		return nil
	})
	if !has {
		t.Skip("the store's Tx does not implement ports.CommitLogOverviewTx (optional)")
	}
	read, noProgress, ahead, confirmed, empty := gid(31), gid(32), gid(33), gid(34), gid(35)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		for g, pos := range map[string]uint64{string(read): 17, string(ahead): 1 << 40} {
			if err := tx.RemoteCommitLog().SetReadPosition(ctx, []byte(g), pos); err != nil {
				return err
			}
		}
		for _, g := range [][]byte{noProgress, ahead, confirmed} {
			for _, seq := range []uint64{5, 6} {
				if _, _, err := tx.LocalCommitLog().Append(ctx, localEntry(g, 1, seq)); err != nil {
					return err
				}
			}
		}
		local, err := tx.LocalCommitLog().List(ctx, confirmed, 0, 0)
		if err != nil {
			return err
		}
		first, err := tx.LocalCommitLog().List(ctx, ahead, 0, 1)
		if err != nil {
			return err
		}
		if err := tx.PublishProgress().Put(ctx, ports.PublishState{GroupID: confirmed, ConfirmedThrough: local[len(local)-1].Seq, Publisher: true}); err != nil {
			return err
		}
		if err := tx.PublishProgress().Put(ctx, ports.PublishState{GroupID: ahead, ConfirmedThrough: first[0].Seq, Publisher: true}); err != nil {
			return err
		}
		return tx.PublishProgress().Put(ctx, ports.PublishState{GroupID: empty, Publisher: true})
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		ov := tx.(ports.CommitLogOverviewTx).CommitLogOverview()
		pos, err := ov.ReadPositions(ctx)
		if err != nil {
			return err
		}
		for _, g := range [][]byte{read, noProgress, ahead, confirmed, empty} {
			want, err := tx.RemoteCommitLog().ReadPosition(ctx, g)
			if err != nil {
				return err
			}
			if pos[string(g)] != want {
				t.Errorf("ReadPositions[%x] = %d, ReadPosition = %d", g, pos[string(g)], want)
			}
		}
		ids, err := ov.Unconfirmed(ctx)
		if err != nil {
			return err
		}
		has := func(g []byte) bool {
			return slices.ContainsFunc(ids, func(id []byte) bool { return bytes.Equal(id, g) })
		}
		for _, g := range [][]byte{noProgress, ahead} {
			if !has(g) {
				t.Errorf("Unconfirmed %x misses group %x, which holds an entry above its progress", ids, g)
			}
		}
		for _, g := range [][]byte{confirmed, empty, read} {
			if has(g) {
				t.Errorf("Unconfirmed names group %x, which has nothing to publish", g)
			}
		}
		if !slices.IsSortedFunc(ids, bytes.Compare) {
			t.Errorf("Unconfirmed %x is not ordered by id", ids)
		}
		return nil
	})
}
