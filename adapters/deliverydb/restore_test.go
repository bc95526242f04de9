package deliverydb

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

// COMP-461, COMP-462, COMP-463: Restore moves the shared counter past
// every id the database knows of by the gap (and past AtLeast), deletes
// every stored key package, puts every group with a public state in
// catch-up at its epoch, and refuses a gap that would pass 2^63-1.
func TestCOMP461_RestoreMovesCounterAndMarksState(t *testing.T) {
	ctx := context.Background()
	for name, open := range dbs() {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			gt, other := topic(), topic()
			group := gt[1:]
			kp := append([]byte{byte(ports.TopicKeyPackages)}, other[1:]...)
			if _, err := s.AppendWithState(ctx, []ports.NewStoredEnvelope{env(infoTopic(group), 1)},
				[]ports.PublicStateAdvance{{GroupID: group, Register: true, Epoch: 4, State: []byte("s4"), Commit: -1, GroupInfo: 0}}); err != nil {
				t.Fatal(err)
			}
			ids, err := s.Append(ctx, []ports.NewStoredEnvelope{env(gt, 2), env(kp, 3), env(other, 4)})
			if err != nil {
				t.Fatal(err)
			}
			highest := ids[2]
			if _, ok, _ := s.CatchUp(ctx, group); ok {
				t.Fatal("a group is in catch-up before any restore")
			}
			rep, err := s.Restore(ctx, RestoreOptions{SequenceGap: 1000})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Highest != highest || rep.Next != highest+1001 || rep.KeyPackagesDeleted != 1 || rep.GroupsInCatchUp != 1 {
				t.Fatalf("report %+v; want highest %d, next %d, one key package, one group", rep, highest, highest+1001)
			}
			next, err := s.Append(ctx, []ports.NewStoredEnvelope{env(other, 5), env(gt, 6)})
			if err != nil || next[0] != rep.Next || next[1] != rep.Next+1 {
				t.Fatalf("appends after the restore = %v, %v; want from %d", next, err, rep.Next)
			}
			if got, err := s.Newest(ctx, kp); !errors.Is(err, ports.ErrNotFound) {
				t.Fatalf("key package after the restore = %v, %v; want none", got, err)
			}
			if epoch, ok, err := s.CatchUp(ctx, group); err != nil || !ok || epoch != 4 {
				t.Fatalf("catch-up = %d, %v, %v; want epoch 4", epoch, ok, err)
			}
			// AtLeast, an id known to have been handed out, counts too.
			rep2, err := s.Restore(ctx, RestoreOptions{SequenceGap: 10, AtLeast: rep.Next + 5000})
			if err != nil || rep2.Next != rep.Next+5011 {
				t.Fatalf("second restore = %+v, %v; want next %d", rep2, err, rep.Next+5011)
			}
			if _, err := s.Restore(ctx, RestoreOptions{SequenceGap: math.MaxInt64}); !errors.Is(err, ErrRestoreGap) {
				t.Fatalf("a gap past 2^63-1: %v, want ErrRestoreGap", err)
			}
			var n int64
			if err := s.db.Raw(`SELECT COUNT(*) FROM delivery_restores`).Row().Scan(&n); err != nil || n != 2 {
				t.Fatalf("restores recorded = %d, %v; want 2", n, err)
			}
		})
	}
}
