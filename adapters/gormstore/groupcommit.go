package gormstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/regroup-mls/regroup/ports"
)

// maxGroup bounds the transactions of callers that one database
// transaction carries, so that a long queue still commits in steps.
const maxGroup = 64

// committer runs the transactions of a store with [Dialect.GroupCommit]:
// callers queue their fn, and one goroutine at a time takes everything
// queued and runs it in one database transaction, each fn inside a
// savepoint of its own, and commits once. The callers of one group share
// its commit — one synchronous write to the disk instead of one each —
// and each still gets what [ports.Store.Tx] promises: a fn that fails or
// panics is rolled back to its savepoint and nothing it wrote is kept,
// and Tx returns only after the commit that holds a successful fn's
// writes (or with the error that lost them).
type committer struct {
	mu      sync.Mutex
	queue   []*queued
	running bool
}

// queued is one caller's transaction waiting in the queue.
type queued struct {
	ctx     context.Context
	fn      func(ports.Tx) error
	relaxed bool
	done    chan outcome
}

// outcome is what one queued transaction came to: err, or a panic of fn
// to raise again in the caller's goroutine.
type outcome struct {
	err      error
	panicked bool
	panicVal any
}

// groupTx queues fn and waits for the group that runs it.
func (s *Store) groupTx(ctx context.Context, fn func(ports.Tx) error, relaxed bool) error {
	q := &queued{ctx: ctx, fn: fn, relaxed: relaxed, done: make(chan outcome, 1)}
	c := &s.group
	c.mu.Lock()
	c.queue = append(c.queue, q)
	if !c.running {
		c.running = true
		go s.runGroups()
	}
	c.mu.Unlock()
	select {
	case o := <-q.done:
		return o.raise()
	case <-ctx.Done():
	}
	// Still queued: leave without running. Taken: fn may be running with
	// the caller's variables, so wait for its outcome.
	c.mu.Lock()
	for i, w := range c.queue {
		if w == q {
			c.queue = append(c.queue[:i], c.queue[i+1:]...)
			c.mu.Unlock()
			return fmt.Errorf("%s store: tx: %w", s.d.Name, ctx.Err())
		}
	}
	c.mu.Unlock()
	return (<-q.done).raise()
}

func (o outcome) raise() error {
	if o.panicked {
		panic(o.panicVal)
	}
	return o.err
}

// runGroups runs groups until the queue is empty. A group is the longest
// run at the head of the queue (up to maxGroup) that is all relaxed or
// all durable, so transactions still begin in the order they came.
func (s *Store) runGroups() {
	c := &s.group
	for {
		c.mu.Lock()
		n := 0
		for n < len(c.queue) && n < maxGroup && c.queue[n].relaxed == c.queue[0].relaxed {
			n++
		}
		if n == 0 {
			c.running = false
			c.mu.Unlock()
			return
		}
		group := append([]*queued(nil), c.queue[:n]...)
		c.queue = append(c.queue[:0], c.queue[n:]...)
		c.mu.Unlock()
		if len(group) == 1 {
			q := group[0]
			q.done <- capture(func() error { return s.txLoop(q.ctx, q.fn, q.relaxed) })
			continue
		}
		s.runGroup(group)
	}
}

// capture runs f and returns its error, or the panic it raised.
func capture(f func() error) (o outcome) {
	defer func() {
		if r := recover(); r != nil {
			o = outcome{panicked: true, panicVal: r}
		}
	}()
	return outcome{err: f()}
}

// runGroup runs several callers' fns in one database transaction. The
// transaction does not follow any caller's context: a caller whose
// context ends while the group runs has its own fn rolled back, not the
// others'. When the group cannot begin or commit, each fn runs again in
// a transaction of its own, which reports its own error.
func (s *Store) runGroup(group []*queued) {
	outs := make([]outcome, len(group))
	ran := make([]bool, len(group)) // fn ran to its end: outs[i] holds what it came to
	ok := make([]bool, len(group))  // and its writes are in the transaction
	relaxed := group[0].relaxed
	committed := false
	err := func() error {
		db, err := s.begin(context.WithoutCancel(group[0].ctx), relaxed)
		if err != nil {
			return err
		}
		defer func() {
			if !committed {
				s.end(db, relaxed, false)
			}
		}()
		for i, q := range group {
			if err := q.ctx.Err(); err != nil {
				outs[i], ran[i] = outcome{err: fmt.Errorf("%s store: tx: %w", s.d.Name, err)}, true
				continue
			}
			sp := fmt.Sprintf("g%d", i)
			if err := db.SavePoint(sp).Error; err != nil {
				return err
			}
			t := &tx{db: db, s: s, detached: true}
			outs[i], ran[i] = capture(func() error { return q.fn(t) }), true
			if outs[i].err == nil && !outs[i].panicked {
				if err := q.ctx.Err(); err != nil {
					outs[i].err = fmt.Errorf("%s store: tx: %w", s.d.Name, err)
				}
			}
			if outs[i].err != nil || outs[i].panicked {
				if err := db.RollbackTo(sp).Error; err != nil {
					return err
				}
				continue
			}
			ok[i] = true
		}
		committed = true
		return s.end(db, relaxed, true)
	}()
	for i, q := range group {
		switch {
		case ran[i] && !ok[i]:
			q.done <- outs[i]
		case ok[i] && err == nil:
			q.done <- outcome{}
		case ok[i] && committed && (s.d.Retryable == nil || !s.d.Retryable(err)):
			// The commit failed: nothing of the group is kept.
			q.done <- outcome{err: fmt.Errorf("%s store: commit: %w", s.d.Name, err)}
		default:
			q.done <- capture(func() error { return s.txLoop(q.ctx, q.fn, q.relaxed) })
		}
	}
}
