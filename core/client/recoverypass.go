package client

import (
	"context"
	"sync"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// The recovery's passes list every group, so the client runs one only
// when it may have work (COMP-284): a held conversation is forked, a
// readd request is kept (this installation's or another's), the last pass
// failed, or something asked for one (a conversation became forked, a
// request arrived); and, as a bounded fallback, when none has run for
// recoveryFallback recovery intervals.

// recoveryFallback is how many recovery intervals may pass without a
// pass.
const recoveryFallback = 6

// recoveryState is what decides whether a recovery pass is due.
type recoveryState struct {
	mu     sync.Mutex
	asked  bool      // recoveryDue was called since the last pass
	failed bool      // the last pass failed
	forked bool      // the last sync view held a forked conversation
	last   time.Time // when the last pass ran
}

func (r *recoveryState) ask() {
	r.mu.Lock()
	r.asked = true
	r.mu.Unlock()
}

func (r *recoveryState) sawForked(forked bool) {
	r.mu.Lock()
	r.forked = forked
	r.mu.Unlock()
}

// anyForked reports whether an active conversation of gs is forked.
func anyForked(gs []ports.Group) bool {
	for _, g := range gs {
		if g.Active && g.ForkState == ports.ForkForked {
			return true
		}
	}
	return false
}

// recoveryPending reports whether a recovery pass may have work now.
func (c *Client) recoveryPending(ctx context.Context) bool {
	r := &c.recovery
	r.mu.Lock()
	due := r.asked || r.failed || r.forked || r.last.IsZero() ||
		c.deps.Clock.Now().Sub(r.last) >= recoveryFallback*c.opts.RecoveryInterval
	r.mu.Unlock()
	if due {
		return true
	}
	var kept bool
	err := c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		held, err := tx.Readds().ListRequested(ctx)
		kept = len(held) > 0
		return err
	})
	return err != nil || kept
}

// recoveryPass runs the recovery's pass when it may have work.
func (c *Client) recoveryPass(ctx context.Context) error {
	if !c.recoveryPending(ctx) {
		return nil
	}
	r := &c.recovery
	r.mu.Lock()
	r.asked = false
	r.mu.Unlock()
	err := c.rec.Pass(ctx)
	r.mu.Lock()
	r.failed, r.last = err != nil, c.deps.Clock.Now()
	r.mu.Unlock()
	return err
}
