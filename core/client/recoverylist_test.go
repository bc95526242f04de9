package client_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
)

// listCounter is a store that counts the group listings that return at
// least min groups, and the listings of kept readd requests.
type listCounter struct {
	ports.Store
	min       int
	full      atomic.Int64
	requested atomic.Int64
}

func (s *listCounter) Tx(ctx context.Context, fn func(tx ports.Tx) error) error {
	return s.Store.Tx(ctx, func(tx ports.Tx) error { return fn(countingTx{tx, s}) })
}

type countingTx struct {
	ports.Tx
	s *listCounter
}

func (t countingTx) Groups() ports.Groups { return countingGroups{t.Tx.Groups(), t.s} }
func (t countingTx) Readds() ports.Readds { return countingReadds{t.Tx.Readds(), t.s} }
func (t countingTx) Messages() ports.Messages {
	return t.Tx.(ports.MessageTx).Messages()
}
func (t countingTx) CommitLogOverview() ports.CommitLogOverview {
	return t.Tx.(ports.CommitLogOverviewTx).CommitLogOverview()
}

type countingGroups struct {
	ports.Groups
	s *listCounter
}

func (g countingGroups) List(ctx context.Context, f ports.GroupFilter) ([]ports.Group, error) {
	gs, err := g.Groups.List(ctx, f)
	if len(gs) >= g.s.min {
		g.s.full.Add(1)
	}
	return gs, err
}

type countingReadds struct {
	ports.Readds
	s *listCounter
}

func (r countingReadds) ListRequested(ctx context.Context) ([]ports.ReaddStatus, error) {
	r.s.requested.Add(1)
	return r.Readds.ListRequested(ctx)
}

// COMP-292: a recovery pass reads the conversations the client knows to
// be forked, not a listing of every group: a sync whose recovery pass runs
// lists the groups once, for its own view (COMP-280).
func TestCOMP292_RecoveryPassDoesNotListEveryGroup(t *testing.T) {
	const n = 12
	w := world.NewFor(t, "embedded", 2*time.Minute)
	quiet := &client.Options{SyncInterval: time.Hour, CommitLogInterval: time.Hour, RecoveryInterval: time.Hour}
	alice := w.Member("alice", world.Config{Options: quiet})
	counter := &listCounter{min: n}
	bob := w.Member("bob", world.Config{Options: quiet, Store: func(s ports.Store) ports.Store { counter.Store = s; return counter }})
	for i := range n {
		if _, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: fmt.Sprint("g", i), Members: []string{bob.C.InboxID()}}); err != nil {
			t.Fatal(err)
		}
	}
	bob.Sync()
	bob.Restart(quiet) // no pass has run in this client: its first sync runs one
	counter.full.Store(0)
	counter.requested.Store(0)
	bob.Sync()
	if counter.requested.Load() == 0 {
		t.Fatal("the sync ran no recovery pass")
	}
	if got := counter.full.Load(); got != 1 {
		t.Fatalf("a sync and its recovery pass listed every group %d times, want once (the sync's view)", got)
	}
}
