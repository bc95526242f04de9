package delivery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/regroup-mls/regroup/internal/fairshare"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// Shared pages (COMP-555 to COMP-557). A commit to a topic wakes every
// subscription that follows it, and all of them whose cursor is the same
// read the same page. The first of them reads and decodes it; the others
// take the same decoded envelopes. A page is charged to the read budget
// once, to the shared pages' own principal (COMP-556), and stays in
// memory while a subscription or a queued response refers to it.
//
// A page is kept for later readers at its cursor while something refers
// to it and it is the topic's current page: a commit to
// the topic (the hub's notify, which runs after the commit is visible)
// drops every kept page of it, so a subscription woken by that commit
// reads the database again and cannot take a page read before the commit.
// The pages of a subscription that woke by its poll timer rather than a
// notification are re-read when older than the poll (a commit by another
// process that nothing reported).

// sharedPrincipal is the principal the shared pages are charged to.
const sharedPrincipal = "shared:pages"

type pageKey struct {
	topic string
	after uint64
}

// sharedPage is one page read once for every subscription at its cursor.
// envs and sizes are never changed after ready is closed: readers copy
// the slice before cutting it.
type sharedPage struct {
	key     pageKey
	started time.Time
	ready   chan struct{}
	envs    []*backendpb.OriginatorEnvelope
	sizes   []int64
	got     int64
	err     error
	hold    *fairshare.Hold // the page's bytes, charged once

	// Guarded by sharedPages.mu.
	refs   int
	kept   bool // in sharedPages.pages
	memos  map[memoKey]*memo
	memoed int64 // bytes the memos hold
	freed  bool
}

type memoKey struct {
	env *backendpb.OriginatorEnvelope
	key any
}

type memo struct {
	mu   sync.Mutex
	v    any
	hold *fairshare.Hold // v's bytes, charged once
}

// sharedPages keeps the pages subscriptions are reading, at most max
// bytes; a page is kept while a subscription or a queued response refers
// to it, and while it is the current page of its topic.
type sharedPages struct {
	budget *fairshare.Budget
	ps     []fairshare.Principal
	max    int64
	grant  int64

	mu    sync.Mutex
	pages map[string]map[uint64]*sharedPage
	bytes int64 // reserved by kept and in-flight pages
}

func newSharedPages(b *fairshare.Budget, max, grant int64) *sharedPages {
	return &sharedPages{budget: b, max: max, grant: grant,
		ps:    []fairshare.Principal{{Key: sharedPrincipal, Kind: "shared", Share: max}},
		pages: map[string]map[uint64]*sharedPage{}}
}

// get returns the page of topic after cursor after, with a reference for
// the caller: fill is true when the caller must read it (then fill or
// abandon it). ok is false when there is no room for another page; the
// caller reads on its own then. A kept page started before notBefore is
// dropped and read again.
func (c *sharedPages) get(topic string, after uint64, notBefore time.Time) (p *sharedPage, fill, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if p := c.pages[topic][after]; p != nil {
		if !p.started.Before(notBefore) {
			p.refs++
			return p, false, true
		}
		c.dropLocked(p)
	}
	// A page is read under a grant of the largest page; the same again
	// stays free for the responses encoded from the pages (share).
	if c.bytes+2*c.grant > c.max {
		return nil, false, false
	}
	p = &sharedPage{key: pageKey{topic, after}, started: now, ready: make(chan struct{}), refs: 1, kept: true}
	m := c.pages[topic]
	if m == nil {
		m = map[uint64]*sharedPage{}
		c.pages[topic] = m
	}
	m[after] = p
	c.bytes += c.grant
	return p, true, true
}

// reservedLocked is what p counts in c.bytes.
func (c *sharedPages) reservedLocked(p *sharedPage) int64 {
	select {
	case <-p.ready:
		if p.hold != nil {
			return p.hold.Held() + p.memoed
		}
		return p.memoed
	default:
		return c.grant
	}
}

// dropLocked stops keeping p; it is freed once unreferenced.
func (c *sharedPages) dropLocked(p *sharedPage) {
	if !p.kept {
		return
	}
	p.kept = false
	if m := c.pages[p.key.topic]; m[p.key.after] == p {
		delete(m, p.key.after)
		if len(m) == 0 {
			delete(c.pages, p.key.topic)
		}
	}
	c.maybeFreeLocked(p)
}

// maybeFreeLocked gives back p's budget once nothing keeps or refers to
// it. An in-flight page is freed by its filler.
func (c *sharedPages) maybeFreeLocked(p *sharedPage) {
	if p.kept || p.refs > 0 || p.freed {
		return
	}
	select {
	case <-p.ready:
	default:
		return
	}
	p.freed = true
	c.bytes -= c.reservedLocked(p)
	if p.hold != nil {
		p.hold.Close()
	}
	for _, m := range p.memos {
		m.hold.Close() // nil when it holds nothing
	}
	p.envs, p.sizes, p.memos = nil, nil, nil
}

// unref drops one reference to p; a page nothing refers to is let go
// (the budget it holds goes back at once).
func (c *sharedPages) unref(p *sharedPage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p.refs--
	if p.refs == 0 {
		c.dropLocked(p)
	}
	c.maybeFreeLocked(p)
}

// invalidate drops the kept pages of topic (a commit to it is visible).
func (c *sharedPages) invalidate(topic string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.pages[topic] {
		c.dropLocked(p)
	}
}

// invalidateAll drops every kept page.
func (c *sharedPages) invalidateAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.pages {
		for _, p := range m {
			c.dropLocked(p)
		}
	}
}

// finish records the filler's outcome and wakes the page's waiters; a
// failed page is not kept. An empty page is: the subscriptions that read
// to the topic's end share that answer too, until the next commit.
func (c *sharedPages) finish(p *sharedPage, envs []*backendpb.OriginatorEnvelope, sizes []int64, got int64, hold *fairshare.Hold, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bytes -= c.grant
	p.envs, p.sizes, p.got, p.hold, p.err = envs, sizes, got, hold, err
	if hold != nil {
		c.bytes += hold.Held()
	}
	close(p.ready)
	if err != nil {
		c.dropLocked(p)
	}
	c.maybeFreeLocked(p)
}

// noWait is an ended context: a hold acquired with it is granted only
// when it fits at once.
var noWait = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// errNotShared is a page that could not be shared; its readers read on
// their own.
var errNotShared = errors.New("page not shared")

// readShared is readPage through the shared pages: the page of topic
// after cursor after, read once for every subscription at that cursor.
// It returns the page and a reference to it (released with unref), or
// errNotShared when the caller should read on its own.
func (s *Service) readShared(ctx context.Context, topic []byte, after uint64, notBefore time.Time) (*sharedPage, error) {
	c := s.shared
	if c == nil {
		return nil, errNotShared
	}
	p, fill, ok := c.get(string(topic), after, notBefore)
	if !ok {
		return nil, errNotShared
	}
	if !fill {
		select {
		case <-p.ready:
		case <-ctx.Done():
			c.unref(p)
			return nil, ctx.Err()
		}
		if p.err != nil {
			c.unref(p)
			return nil, errNotShared
		}
		return p, nil
	}
	// The filler reads under its own ctx; the page is charged to the
	// shared principal, not to the filler's (COMP-556).
	hold, err := c.budget.Acquire(ctx, c.ps, 0)
	if err == nil {
		var envs []*backendpb.OriginatorEnvelope
		var sizes []int64
		var got int64
		envs, sizes, got, err = s.readPage(ctx, hold, topic, after, s.opts.MaxPageSize)
		if err == nil {
			c.finish(p, envs, sizes, got, hold, nil)
			return p, nil
		}
		hold.Close()
	}
	c.finish(p, nil, nil, 0, nil, err)
	c.unref(p)
	return nil, err
}

// share returns, built once per page, envelope and key, the value build
// makes from e (a transport's encoded response), with a reference to the
// page that keeps it and its bytes (charged once to the page's hold)
// until release. The value is shared: callers must not change it.
func (c *sharedPages) share(ctx context.Context, p *sharedPage, e *backendpb.OriginatorEnvelope, key any, build func() (any, int64, error)) (v any, release func(), err error) {
	c.mu.Lock()
	if p.freed {
		c.mu.Unlock()
		return nil, nil, fmt.Errorf("%w: the page was let go", errNotShared)
	}
	p.refs++
	if p.memos == nil {
		p.memos = map[memoKey]*memo{}
	}
	m := p.memos[memoKey{e, key}]
	if m == nil {
		m = new(memo)
		p.memos[memoKey{e, key}] = m
	}
	c.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(func() { c.unref(p) }) }
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.v == nil {
		v, n, err := build()
		if err != nil {
			release()
			return nil, nil, err
		}
		// The value's bytes count against the budget once, to the shared
		// pages' principal, when there is room now: a value that would
		// wait for room is not shared (the caller sends its own, under
		// its own principals), and a later caller tries again.
		h, err := c.budget.Acquire(noWait, c.ps, n)
		if err != nil {
			release()
			return nil, nil, fmt.Errorf("%w: no read budget for %d shared bytes now", errNotShared, n)
		}
		c.mu.Lock()
		p.memoed += n
		c.bytes += n
		c.mu.Unlock()
		m.v, m.hold = v, h
	}
	return m.v, release, nil
}
