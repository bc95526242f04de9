package deliverydb

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/regroup-mls/regroup/ports"
)

// maxGroup bounds the appends one group commit takes.
const maxGroup = 128

// groupTakeover is how long a group keeps the writers' turn before
// another writer may start a group beside it (Options.Writers above 1):
// well above a group statement's usual time, so that normally one group
// runs at a time and takes every append that queued meanwhile.
const groupTakeover = 20 * time.Millisecond

// gatherLimit bounds how long a group waits for more appends (gatherFor).
const gatherLimit = 2 * time.Millisecond

// appendReq is one Append waiting for its group commit.
type appendReq struct {
	ctx    context.Context
	envs   []ports.NewStoredEnvelope
	queued time.Time
	ids    []uint64
	err    error
	// lockWait is how long the group's statement waited for topic row
	// locks (PostgreSQL).
	lockWait time.Duration
	done     chan struct{}
}

// groupCommitter runs the store's writers: each takes every append
// queued while it was busy and commits them together (commit), so one
// transaction serves many appends. On SQLite there is one writer, which
// commits a group in one transaction with a savepoint per append, so one
// fsync serves many appends; the appends of a group take ids from the
// shared counter in queue order and become visible together, so on every
// topic ids follow commit order and a reader re-reading from its cursor
// never misses an envelope. On PostgreSQL a few writers (Options.Writers) each run a
// group as one statement (see appendFunction), whose topic locks keep
// every topic's ids in commit order.
//
// The writers take turns: only the writer holding the turn collects a
// group, and it hands the turn on when its group has committed, or
// earlier when the group has run for groupTakeover (a statement waiting
// for a topic another process holds, or for a slow disk), so that the
// next group can start beside it. Normally one group runs at a time, and
// the appends that arrive meanwhile all go into the next.
type groupCommitter struct {
	s      *Store
	commit func(batch []*appendReq)
	reqs   chan *appendReq
	quit   chan struct{}
	ended  chan struct{}
	// turn holds the one token a writer needs to collect a group.
	turn    chan struct{}
	writers int
	// takeover and gatherMax are groupTakeover and gatherLimit; tests
	// change them before the first append.
	takeover, gatherMax time.Duration
	// gather makes the writer wait, before it closes a group smaller than
	// the previous one, for the appends of that group to come back (see
	// gatherFor); PostgreSQL sets it.
	gather bool
	// last and took are the size and time of the latest group.
	last, took atomic.Int64
	// groups and grouped count the groups run and the appends they held.
	groups, grouped atomic.Int64
	// waiting counts the appends waiting for a writer to take them, taken
	// those a writer took; tests wait on them.
	waiting, taken atomic.Int64
	// freeTurns, set only by benchmarks before the first append, lets
	// every writer start a group as soon as it is free and turns gather
	// off: how the writers worked before they took turns.
	freeTurns bool
	// afterAppend, set only by tests before the first append, runs after
	// each request's inserts and before the group commits (SQLite).
	afterAppend func(ctx context.Context)
}

// newGroupCommitter starts writers goroutines that pass each group to
// commit, which must fill in every request's ids or err.
func newGroupCommitter(s *Store, writers int, commit func(g *groupCommitter, batch []*appendReq)) *groupCommitter {
	g := &groupCommitter{s: s, reqs: make(chan *appendReq), quit: make(chan struct{}), ended: make(chan struct{}),
		turn: make(chan struct{}, 1), writers: writers, takeover: groupTakeover, gatherMax: gatherLimit}
	g.turn <- struct{}{}
	g.commit = func(batch []*appendReq) { commit(g, batch) }
	done := make(chan struct{}, writers)
	for range writers {
		go func() {
			defer func() { done <- struct{}{} }()
			g.run()
		}()
	}
	go func() {
		for range writers {
			<-done
		}
		close(g.ended)
	}()
	return g
}

func (g *groupCommitter) stop() {
	close(g.quit)
	<-g.ended
}

// append queues envs and waits for the transaction that takes them. A
// ctx that ends before they are queued stores nothing; once queued, the
// group's transaction skips them if ctx has ended before their turn, and
// otherwise may commit them, so append waits for that transaction and
// reports its outcome (ports.EnvelopeStore.Append: never return while a
// commit that may hold the envelopes is in flight).
func (g *groupCommitter) append(ctx context.Context, envs []ports.NewStoredEnvelope) ([]uint64, error) {
	r := &appendReq{ctx: ctx, envs: envs, queued: time.Now(), done: make(chan struct{})}
	g.waiting.Add(1)
	select {
	case g.reqs <- r:
		g.waiting.Add(-1)
		g.taken.Add(1)
	case <-ctx.Done():
		g.waiting.Add(-1)
		return nil, dbErr(ctx, "append envelopes", ctx.Err())
	case <-g.quit:
		g.waiting.Add(-1)
		return nil, fmt.Errorf("append envelopes: %w", ports.ErrClosed)
	}
	<-r.done
	if r.err != nil {
		return nil, dbErr(ctx, "append envelopes", r.err)
	}
	return r.ids, nil
}

func (g *groupCommitter) run() {
	for {
		select {
		case <-g.turn:
		case <-g.quit:
			return
		}
		var batch []*appendReq
		select {
		case r := <-g.reqs:
			batch = append(batch, r)
		case <-g.quit:
			g.turn <- struct{}{}
			return
		}
	collect:
		for len(batch) < maxGroup {
			select {
			case r := <-g.reqs:
				batch = append(batch, r)
			default:
				break collect
			}
		}
		if g.freeTurns {
			g.turn <- struct{}{}
		}
		if last := int(g.last.Load()); g.gather && !g.freeTurns && len(batch) < last {
			batch = g.gatherFor(batch, last, time.Duration(g.took.Load()))
		}
		start := time.Now()
		g.groups.Add(1)
		g.grouped.Add(int64(len(batch)))
		var handed sync.Once
		handOn := func() {
			if !g.freeTurns {
				handed.Do(func() { g.turn <- struct{}{} })
			}
		}
		if g.writers > 1 && !g.freeTurns {
			early := time.AfterFunc(g.takeover, handOn)
			g.commit(batch)
			early.Stop()
		} else {
			g.commit(batch)
		}
		g.last.Store(int64(len(batch)))
		g.took.Store(int64(time.Since(start)))
		handOn()
		for _, r := range batch {
			if r.err == nil && r.ids != nil {
				g.s.hooks.idWait(start.Sub(r.queued) + r.lockWait)
			}
			close(r.done)
		}
	}
}

// gatherFor adds appends to batch as they arrive until it holds want, for
// at most a quarter of the previous group's time and gatherLimit. The
// publishers a group acknowledged usually append again at once; taking
// them into the next group instead of leaving them to the one after it
// keeps the groups whole. A group's statement has a fixed cost in
// PostgreSQL and, with fsync on, waits for a WAL flush while it holds its
// topics' locks, so that groups naming the same topics commit one at a
// time: what a group costs is shared by as many appends as it holds.
func (g *groupCommitter) gatherFor(batch []*appendReq, want int, took time.Duration) []*appendReq {
	wait := min(took/4, g.gatherMax)
	if wait <= 0 {
		return batch
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for len(batch) < want && len(batch) < maxGroup {
		select {
		case r := <-g.reqs:
			batch = append(batch, r)
		case <-timer.C:
			return batch
		case <-g.quit:
			return batch
		}
	}
	return batch
}

// sqliteCommit runs one transaction over batch and reports to each
// request.
func sqliteCommit(g *groupCommitter, batch []*appendReq) {
	g.s.writeMu.Lock()
	defer g.s.writeMu.Unlock()
	// The transaction is not bound to any one request's ctx: a caller that
	// gives up must not abort the others' appends.
	err := g.s.db.Transaction(func(tx *gorm.DB) error {
		for _, r := range batch {
			if r.ctx.Err() != nil {
				r.err = r.ctx.Err()
				continue
			}
			if err := tx.Exec(`SAVEPOINT append_req`).Error; err != nil {
				return err
			}
			ids, err := g.s.appendIn(tx, r.envs)
			if g.afterAppend != nil {
				g.afterAppend(r.ctx)
			}
			if err != nil {
				r.err = err
				g.s.hooks.dbError("append")
				if rerr := tx.Exec(`ROLLBACK TO SAVEPOINT append_req`).Error; rerr != nil {
					return rerr
				}
			} else {
				r.ids = ids
			}
			if err := tx.Exec(`RELEASE SAVEPOINT append_req`).Error; err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		g.s.hooks.dbError("append")
		for _, r := range batch {
			if r.err == nil {
				r.ids, r.err = nil, err
			}
		}
	}
}

// postgresCommit runs a group as one call of delivery_append.
func postgresCommit(g *groupCommitter, batch []*appendReq) { _ = g.s.pgAppend(batch) }
