package client

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/ports"
)

// TestCOMP284_RecoveryPassOnlyWhenItMayHaveWork: after a pass, none is due
// until something may give it work — a request for one, a forked
// conversation in the last view, a kept readd request, a failed pass —
// or six recovery intervals pass.
func TestCOMP284_RecoveryPassOnlyWhenItMayHaveWork(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "client.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	c := &Client{deps: Deps{Clock: clk, Store: store}, opts: Options{RecoveryInterval: 10 * time.Second}}
	if !c.recoveryPending(ctx) {
		t.Fatal("no pass before the first: want one")
	}
	passed := func() {
		c.recovery = recoveryState{last: clk.Now()}
	}
	passed()
	if c.recoveryPending(ctx) {
		t.Fatal("a pass is due right after one, with nothing to do")
	}
	for _, tc := range []struct {
		why string
		set func()
	}{
		{"recovery was asked for", func() { c.recovery.ask() }},
		{"the last view held a forked conversation", func() { c.recovery.sawForked([][]byte{[]byte("group-id-0000002")}) }},
		{"the last pass failed", func() { c.recovery.failed = true }},
		{"six intervals passed", func() { clk.Advance(recoveryFallback * c.opts.RecoveryInterval) }},
	} {
		passed()
		tc.set()
		if !c.recoveryPending(ctx) {
			t.Errorf("no pass due when %s", tc.why)
		}
	}
	passed()
	clk.Advance(recoveryFallback*c.opts.RecoveryInterval - time.Second)
	if c.recoveryPending(ctx) {
		t.Error("a pass is due before six intervals, with nothing to do")
	}
	err = store.Tx(ctx, func(tx ports.Tx) error {
		return tx.Readds().Upsert(ctx, []byte("group-id-0000001"), make([]byte, 32), func(s *ports.ReaddStatus) error {
			s.Requested, s.RequestedAt = true, 7
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if !c.recoveryPending(ctx) {
		t.Error("no pass due while a readd request is kept")
	}
}
