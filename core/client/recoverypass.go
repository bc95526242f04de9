package client

import (
	"context"
	"sync"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// A recovery pass reads only the conversations the client knows to be
// forked (COMP-292): those of the last sync's view, which lists every
// group anyway, and those a fork event named since. The client runs one
// only when it may have work (COMP-284): a held conversation is forked, a
// readd request is kept (this installation's or another's), the last pass
// failed, or something asked for one (a conversation became forked, a
// request arrived); and, as a bounded fallback, when none has run for
// recoveryFallback recovery intervals.

// recoveryFallback is how many recovery intervals may pass without a
// pass.
const recoveryFallback = 6

// recoveryState is what decides whether a recovery pass is due, and
// which conversations it reads.
type recoveryState struct {
	mu     sync.Mutex
	asked  bool            // recoveryDue was called since the last pass
	failed bool            // the last pass failed
	forked map[string]bool // forked conversations: the last sync view's and fork events'
	events map[string]bool // conversations fork events named since the last sync view
	last   time.Time       // when the last pass ran
}

func (r *recoveryState) ask() {
	r.mu.Lock()
	r.asked = true
	r.mu.Unlock()
}

// sawForked replaces the forked conversations with those of a sync view
// and those fork events named since the previous view: an event may come
// after the view was read, within the same sync.
func (r *recoveryState) sawForked(ids [][]byte) {
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[string(id)] = true
	}
	r.mu.Lock()
	for id := range r.events {
		m[id] = true
	}
	r.forked, r.events = m, nil
	r.mu.Unlock()
}

// forkedNow adds a conversation a fork event named.
func (r *recoveryState) forkedNow(id []byte) {
	r.mu.Lock()
	if r.forked == nil {
		r.forked = map[string]bool{}
	}
	if r.events == nil {
		r.events = map[string]bool{}
	}
	r.forked[string(id)], r.events[string(id)] = true, true
	r.mu.Unlock()
}

// forkedIDs returns the forked conversations a pass reads.
func (r *recoveryState) forkedIDs() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([][]byte, 0, len(r.forked))
	for id := range r.forked {
		ids = append(ids, []byte(id))
	}
	return ids
}

// forkedOf returns the active conversations of gs that are forked.
func forkedOf(gs []ports.Group) [][]byte {
	var ids [][]byte
	for _, g := range gs {
		if g.Active && g.ForkState == ports.ForkForked {
			ids = append(ids, g.ID)
		}
	}
	return ids
}

// recoveryPending reports whether a recovery pass may have work now.
func (c *Client) recoveryPending(ctx context.Context) bool {
	r := &c.recovery
	r.mu.Lock()
	due := r.asked || r.failed || len(r.forked) > 0 || r.last.IsZero() ||
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

// recoveryPass runs the recovery's pass when it may have work: requests
// for the forked conversations it knows of, and answers to the requests
// kept (COMP-292).
func (c *Client) recoveryPass(ctx context.Context) error {
	if !c.recoveryPending(ctx) {
		return nil
	}
	r := &c.recovery
	r.mu.Lock()
	r.asked = false
	r.mu.Unlock()
	err := c.rec.PassGroups(ctx, r.forkedIDs())
	r.mu.Lock()
	r.failed, r.last = err != nil, c.deps.Clock.Now()
	r.mu.Unlock()
	return err
}
