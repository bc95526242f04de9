package gormstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"gorm.io/gorm"

	"github.com/regroup-mls/regroup/ports"
)

// maxGroup bounds the transactions of callers that one database
// transaction carries, so that a long queue still commits in steps.
const maxGroup = 64

// committer runs the transactions of a store with [Dialect.GroupCommit]
// (COMP-550): callers queue, and one goroutine at a time takes the run of
// queued transactions at the head of the queue and opens one database
// transaction for them. Each caller runs its own fn, in its own
// goroutine, when its turn comes, inside a savepoint of its own; then the
// committer commits once. The callers of one group share its commit —
// one synchronous write to the disk instead of one each — and each still
// gets what [ports.Store.Tx] promises: a fn that fails, panics or exits
// its goroutine is rolled back to its savepoint and nothing it wrote is
// kept, and Tx returns only after the commit that holds a successful
// fn's writes (or with the error that lost them).
type committer struct {
	mu      sync.Mutex
	queue   []*queued
	running bool
}

// queued is one caller's transaction waiting in the queue.
type queued struct {
	ctx     context.Context
	relaxed bool
	// alone: run in a transaction of its own (after its group failed).
	alone bool
	turn  chan turn
	done  chan error
}

// turn is the committer's go-ahead to a queued caller: run fn in db (a
// group's transaction), or alone when db is nil, or not at all: skip is
// the caller's error then, and rerun sends it to the queue again, alone.
// The caller reports on back when its fn is done with db.
type turn struct {
	db    *gorm.DB
	skip  error
	rerun bool
	back  chan bool
}

// errRerun tells a caller whose group failed to queue again, alone.
var errRerun = errors.New("group failed: run again alone")

// groupTx queues the caller and runs fn when its turn comes.
func (s *Store) groupTx(ctx context.Context, fn func(ports.Tx) error, relaxed bool) error {
	alone := false
	for {
		err := s.groupOnce(ctx, fn, relaxed, alone)
		if !errors.Is(err, errRerun) {
			return err
		}
		alone = true
	}
}

func (s *Store) groupOnce(ctx context.Context, fn func(ports.Tx) error, relaxed, alone bool) error {
	q := &queued{ctx: ctx, relaxed: relaxed, alone: alone, turn: make(chan turn, 1), done: make(chan error, 1)}
	c := &s.group
	c.mu.Lock()
	c.queue = append(c.queue, q)
	if !c.running {
		c.running = true
		go s.runGroups()
	}
	c.mu.Unlock()
	var tn turn
	select {
	case tn = <-q.turn:
	case <-ctx.Done():
		c.mu.Lock()
		for i, w := range c.queue {
			if w == q {
				c.queue = append(c.queue[:i], c.queue[i+1:]...)
				c.mu.Unlock()
				return fmt.Errorf("%s store: tx: %w", s.d.Name, ctx.Err())
			}
		}
		c.mu.Unlock()
		tn = <-q.turn // taken: the committer waits for this caller
	}
	switch {
	case tn.rerun:
		tn.back <- false
		return errRerun
	case tn.skip != nil:
		tn.back <- false
		return tn.skip
	case tn.db == nil:
		defer func() { tn.back <- false }() // also when fn panics or exits
		return s.txLoop(ctx, fn, relaxed)
	}
	reported := false
	defer func() {
		if !reported { // fn panicked or exited its goroutine
			tn.back <- false
		}
	}()
	err := fn(&tx{db: tn.db, s: s, detached: true})
	if err == nil && ctx.Err() != nil {
		err = fmt.Errorf("%s store: tx: %w", s.d.Name, ctx.Err())
	}
	reported = true
	tn.back <- err == nil
	if err != nil {
		return err
	}
	return <-q.done
}

// runGroups runs groups until the queue is empty. A group is the longest
// run at the head of the queue (up to maxGroup) that is all relaxed or
// all durable, so transactions still begin in the order they came; a
// transaction to run alone is a group of its own.
func (s *Store) runGroups() {
	c := &s.group
	for {
		c.mu.Lock()
		n := 0
		for n < len(c.queue) && n < maxGroup && !c.queue[n].alone && c.queue[n].relaxed == c.queue[0].relaxed {
			n++
		}
		if len(c.queue) > 0 && n == 0 {
			n = 1 // one to run alone
		}
		if n == 0 {
			c.running = false
			c.mu.Unlock()
			return
		}
		group := append([]*queued(nil), c.queue[:n]...)
		c.queue = append(c.queue[:0], c.queue[n:]...)
		c.mu.Unlock()
		back := make(chan bool, 1)
		if len(group) == 1 {
			group[0].turn <- turn{back: back}
			<-back
			continue
		}
		s.runGroup(group, back)
	}
}

// runGroup runs a group's fns in one database transaction, one after
// another. The transaction does not follow any caller's context: a
// caller whose context ends while the group runs has its own fn rolled
// back, not the others'. When the group cannot begin or commit, each of
// its callers runs again alone, with its own error.
func (s *Store) runGroup(group []*queued, back chan bool) {
	relaxed := group[0].relaxed
	ok := make([]bool, len(group))
	next := 0 // the callers from next on have not had their turn
	err := func() error {
		db, err := s.begin(context.WithoutCancel(group[0].ctx), relaxed)
		if err != nil {
			return err
		}
		committed := false
		defer func() {
			if !committed {
				s.end(db, relaxed, false)
			}
		}()
		for i, q := range group {
			next = i + 1
			if err := q.ctx.Err(); err != nil {
				q.turn <- turn{skip: fmt.Errorf("%s store: tx: %w", s.d.Name, err), back: back}
				<-back
				continue
			}
			sp := fmt.Sprintf("g%d", i)
			if err := db.SavePoint(sp).Error; err != nil {
				next = i
				return err
			}
			q.turn <- turn{db: db, back: back}
			if ok[i] = <-back; !ok[i] {
				if err := db.RollbackTo(sp).Error; err != nil {
					return err
				}
			}
		}
		committed = true
		return s.end(db, relaxed, true)
	}()
	for i, q := range group {
		switch {
		case i >= next:
			q.turn <- turn{rerun: true, back: back}
			<-back
		case !ok[i]:
			// Its caller has its error already.
		case err == nil:
			q.done <- nil
		default:
			q.done <- errRerun
		}
	}
}
