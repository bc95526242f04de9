package delivery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/internal/fairshare"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// hub wakes the subscriptions of a topic after a commit to it.
type hub struct {
	mu   sync.Mutex
	subs map[string]map[*subscription]struct{}
	// pages, when not nil, drops a topic's shared pages before its
	// subscriptions are woken: a woken subscription reads the commit.
	pages *sharedPages
}

func newHub() *hub { return &hub{subs: make(map[string]map[*subscription]struct{})} }

func (h *hub) add(s *subscription, topics []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range topics {
		m := h.subs[t]
		if m == nil {
			m = make(map[*subscription]struct{})
			h.subs[t] = m
		}
		m[s] = struct{}{}
	}
}

func (h *hub) remove(s *subscription, topics []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range topics {
		delete(h.subs[t], s)
		if len(h.subs[t]) == 0 {
			delete(h.subs, t)
		}
	}
}

func (h *hub) notifyAll() {
	if h.pages != nil {
		h.pages.invalidateAll()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.subs {
		for s := range m {
			s.markAll()
		}
	}
}

func (h *hub) notify(topic []byte) {
	if h.pages != nil {
		h.pages.invalidate(string(topic))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[string(topic)] {
		s.mark(string(topic))
	}
}

// subscription reads its topics from their cursors when Next needs an
// envelope and a topic has been woken (a commit to it, its first read, a
// poll), and hands the envelopes out in order per topic. It reads only
// woken topics, one page at a time, and holds at most one page: the
// envelopes of that page count against the service's read budget until
// the caller comes back for the next one (COMP-140). Reading from the
// database after each wake, never from the notification itself, is what
// makes the stream gap-free: every envelope at or below a committed id is
// visible, and a topic woken while it is being read is read again.
type subscription struct {
	svc     *Service
	caller  ports.Caller
	topics  []string
	index   map[string]int
	cursors []uint64

	// ctx ends with the subscription (Close, or the Subscribe ctx).
	ctx    context.Context
	cancel context.CancelFunc
	stop   func() bool

	mu      sync.Mutex
	pending []int  // woken topics not yet read, in wake order
	queued  []bool // whether topic i is in pending
	wake    chan struct{}
	endErr  error // why the subscription ended, once it has

	// Owned by Next (nextMu): the page being handed out.
	nextMu   sync.Mutex
	buf      []*backendpb.OriginatorEnvelope
	sizes    []int64
	bufTopic int
	hold     *fairshare.Hold // read budget held for buf and the last envelope handed out
	lastSize int64
	failed   error
	pollAt   time.Time
	// shared is the shared page buf came from (sharedpages.go), held by
	// reference until the caller comes back after its last envelope; the
	// page's bytes are charged to the budget once, by the shared pages,
	// and to this subscription's principals' shares by shareHold
	// (COMP-556), not to hold.
	shared    *sharedPage
	shareHold *fairshare.Hold
	// fresh[i] is when topic i was last woken by the poll timer: a
	// shared page read before it is read again.
	fresh []time.Time
}

// Subscribe delivers, for each cursor, every envelope after it in sequence
// id order and then every new one as it is stored. Cursors must name
// distinct readable topics, each cursor at most 2^63-1 (COMP-143);
// key-package topics cannot be subscribed to. Next is meant for one
// goroutine at a time; concurrent calls are serialized.
func (s *Service) Subscribe(ctx context.Context, caller ports.Caller, cursors []ports.TopicCursor) (ports.Subscription, error) {
	if len(cursors) == 0 {
		return nil, fmt.Errorf("subscribe: %w: no cursors", ports.ErrInvalidArgument)
	}
	if len(cursors) > s.opts.MaxCursors {
		return nil, fmt.Errorf("subscribe: %w: %d cursors, limit %d", ports.ErrInvalidArgument, len(cursors), s.opts.MaxCursors)
	}
	sub := &subscription{
		svc:     s,
		caller:  caller,
		index:   make(map[string]int, len(cursors)),
		wake:    make(chan struct{}, 1),
		queued:  make([]bool, len(cursors)),
		pending: make([]int, 0, len(cursors)),
		fresh:   make([]time.Time, len(cursors)),
	}
	for i, c := range cursors {
		kind, err := checkRead(caller, c.Topic)
		if err != nil {
			return nil, fmt.Errorf("subscribe: cursor %d: %w", i, err)
		}
		if kind == ports.TopicKeyPackages {
			return nil, fmt.Errorf("subscribe: cursor %d: %w: key-package topics are read with QueryNewest", i, ports.ErrInvalidArgument)
		}
		if err := checkCursor(c.After); err != nil {
			return nil, fmt.Errorf("subscribe: cursor %d: %w", i, err)
		}
		if _, dup := sub.index[string(c.Topic)]; dup {
			return nil, fmt.Errorf("subscribe: cursor %d: %w: topic named twice", i, ports.ErrInvalidArgument)
		}
		sub.index[string(c.Topic)] = i
		sub.topics = append(sub.topics, string(c.Topic))
		sub.cursors = append(sub.cursors, c.After)
	}
	sub.ctx, sub.cancel = context.WithCancel(context.WithoutCancel(ctx))
	// COMP-321: the pages this subscription holds count against the
	// shares of the principals it was opened by.
	sub.hold = s.newHold(ctx)
	sub.shareHold, _ = s.budget.AcquireShares(ctx, fairshare.From(ctx), 0) // holding 0 bytes never waits
	// Register before the first read so that no commit between the read
	// and the registration goes unnoticed; every topic starts woken (its
	// backlog).
	s.hub.add(sub, sub.topics)
	sub.markAll()
	sub.pollAt = sub.nextPoll()
	sub.stop = context.AfterFunc(ctx, func() {
		sub.end(fmt.Errorf("%w: subscription context ended: %w", ports.ErrClosed, ctx.Err()))
	})
	return sub, nil
}

// mark queues topic for reading and wakes a waiting Next.
func (sub *subscription) mark(topic string) {
	i, ok := sub.index[topic]
	if !ok {
		return
	}
	sub.mu.Lock()
	if !sub.queued[i] {
		sub.queued[i] = true
		sub.pending = append(sub.pending, i)
	}
	sub.mu.Unlock()
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}

func (sub *subscription) markAll() {
	for _, t := range sub.topics {
		sub.mark(t)
	}
}

// popPending takes the first woken topic; it is no longer marked, so a
// wake that arrives while it is read marks it again.
func (sub *subscription) popPending() (int, bool) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if len(sub.pending) == 0 {
		return 0, false
	}
	i := sub.pending[0]
	sub.pending = sub.pending[1:]
	sub.queued[i] = false
	return i, true
}

func (sub *subscription) nextPoll() time.Time {
	if d := sub.svc.opts.PollInterval; d > 0 {
		return time.Now().Add(d)
	}
	return time.Time{}
}

// Next returns the next envelope, reading a page of a woken topic when it
// has none at hand. Once the subscription has ended, Next reports why:
// an error wrapping [ports.ErrClosed] after Close or when the Subscribe
// ctx ended, or the read failure that ended it.
//
// An envelope of a page shared with other subscriptions (COMP-555) is
// handed out as a copy: the caller owns what Next returns.
func (sub *subscription) Next(ctx context.Context) (*backendpb.OriginatorEnvelope, error) {
	sub.nextMu.Lock()
	defer sub.nextMu.Unlock()
	e, err := sub.next(ctx)
	if err == nil && sub.shared != nil {
		e = proto.CloneOf(e)
	}
	return e, err
}

// ShareFunc builds, once per key for a shared envelope, a value every
// subscription handed that envelope uses (a transport's encoded
// response), charging its bytes to the read budget once; release gives
// up the caller's reference, which keeps the value and the envelope's
// page in memory and charged until then. The value is shared: callers
// must not change it.
type ShareFunc = func(ctx context.Context, key any, build func() (v any, bytes int64, err error)) (v any, release func(), err error)

// NextShared is Next for a server that sends what it is handed without
// changing it: when the envelope comes from a page shared with other
// subscriptions (COMP-555), it is the shared envelope itself, which the
// caller must not change, and share builds values shared with the
// others; share is nil otherwise.
func (sub *subscription) NextShared(ctx context.Context) (e *backendpb.OriginatorEnvelope, share ShareFunc, err error) {
	sub.nextMu.Lock()
	defer sub.nextMu.Unlock()
	e, err = sub.next(ctx)
	if err != nil || sub.shared == nil {
		return e, nil, err
	}
	p, pages := sub.shared, sub.svc.shared
	return e, func(ctx context.Context, key any, build func() (any, int64, error)) (any, func(), error) {
		return pages.share(ctx, p, e, key, build)
	}, nil
}

// next is Next without the copy; nextMu must be held.
func (sub *subscription) next(ctx context.Context) (*backendpb.OriginatorEnvelope, error) {
	for {
		if e, ok := sub.takeBuffered(); ok {
			return e, nil
		}
		if err := sub.ended(); err != nil {
			return nil, err
		}
		if sub.failed != nil {
			return nil, fmt.Errorf("subscription: %w", sub.failed)
		}
		i, ok := sub.popPending()
		if !ok {
			if err := sub.wait(ctx); err != nil {
				return nil, err
			}
			continue
		}
		if err := sub.read(ctx, i); err != nil {
			sub.mark(sub.topics[i]) // not read: read it next time
			if sub.ended() != nil {
				continue // report the end
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			sub.failed = err
			return nil, fmt.Errorf("subscription: %w", err)
		}
	}
}

// TryNext returns the next envelope when the subscription holds one
// already read, without reading or waiting; ok is false otherwise. A
// server that sends several envelopes per message takes them with it
// after Next returned one. An envelope of a shared page is the shared
// envelope itself (see NextShared): the caller must not change it.
func (sub *subscription) TryNext() (*backendpb.OriginatorEnvelope, bool) {
	sub.nextMu.Lock()
	defer sub.nextMu.Unlock()
	if sub.ended() != nil {
		return nil, false
	}
	return sub.takeBuffered()
}

// takeBuffered hands out the next envelope of the page at hand, if any:
// the caller is done with the one handed out before, whose read budget
// goes back. nextMu must be held.
func (sub *subscription) takeBuffered() (*backendpb.OriginatorEnvelope, bool) {
	sub.release(sub.lastSize)
	sub.lastSize = 0
	if len(sub.buf) == 0 {
		sub.dropShared()
		return nil, false
	}
	e, n := sub.buf[0], sub.sizes[0]
	sub.buf[0] = nil
	sub.buf, sub.sizes = sub.buf[1:], sub.sizes[1:]
	sub.cursors[sub.bufTopic] = e.GetSequenceId()
	if sub.shared == nil {
		sub.lastSize = n
	}
	if c := sub.svc.opts.Clock; c != nil {
		sub.svc.opts.Observer.Delivered(time.Duration(c.Now().UnixNano() - e.GetServerTimestampNs()))
	}
	return e, true
}

// wait blocks until a topic is woken, the poll interval passes, or the
// subscription or ctx ends.
func (sub *subscription) wait(ctx context.Context) error {
	// The poll is operational, not a deadline of any rule, so it runs on
	// a real timer and never shows up as a waiter on a fake clock.
	var pollC <-chan time.Time
	if !sub.pollAt.IsZero() {
		t := time.NewTimer(time.Until(sub.pollAt))
		defer t.Stop()
		pollC = t.C
	}
	select {
	case <-sub.wake:
	case <-pollC:
		sub.pollAt = sub.nextPoll()
		now := time.Now()
		for i := range sub.fresh {
			sub.fresh[i] = now
		}
		sub.markAll()
	case <-sub.ctx.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// read loads one page of topic i into buf under the read budget, and
// queues the topic again when the page may not have reached its end.
func (sub *subscription) read(ctx context.Context, i int) error {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(sub.ctx, cancel)()
	topic := []byte(sub.topics[i])
	var (
		page  []*backendpb.OriginatorEnvelope
		sizes []int64
		got   int64
	)
	// COMP-555: the subscriptions at the same cursor share one read of
	// the page; this one takes its own copy of the list, which it cuts
	// and empties, never of the envelopes.
	sp, err := sub.svc.readShared(rctx, topic, sub.cursors[i], sub.fresh[i])
	switch {
	case err == nil:
		// COMP-556: the page counts against this subscription's
		// principals' shares while it keeps it, as its own page would.
		if err := sub.shareHold.Grow(rctx, sp.got); err != nil {
			sub.svc.shared.unref(sp)
			return fmt.Errorf("%w: waiting for read budget: %w", ports.ErrUnavailable, err)
		}
		sub.shared = sp
		page, sizes, got = append([]*backendpb.OriginatorEnvelope(nil), sp.envs...), sp.sizes, sp.got
	case errors.Is(err, errNotShared):
		page, sizes, got, err = sub.svc.readPage(rctx, sub.hold, topic, sub.cursors[i], sub.svc.opts.MaxPageSize)
		if err != nil {
			return err
		}
	default:
		return err
	}
	// A user who left the group reads nothing above its leave request
	// (leave.go); a page cut short is the topic's end for it.
	through, left, err := sub.svc.leftThrough(rctx, sub.caller, topic)
	if err != nil {
		if sp != nil {
			sub.dropShared()
		} else {
			sub.release(got)
		}
		return err
	}
	var cut bool
	if left {
		var dropped int64
		page, sizes, dropped, cut = cutLeft(page, sizes, through)
		if sp == nil {
			sub.release(dropped)
		}
	}
	sub.buf, sub.sizes, sub.bufTopic = page, sizes, i
	if !cut && sub.svc.mayContinue(len(page), got) {
		sub.mark(sub.topics[i])
	}
	return nil
}

// dropShared gives up the reference to the shared page buf came from.
func (sub *subscription) dropShared() {
	if sub.shared != nil {
		sub.shareHold.Release(sub.shareHold.Held())
		sub.svc.shared.unref(sub.shared)
		sub.shared = nil
	}
}

func (sub *subscription) release(n int64) {
	if n > 0 {
		sub.hold.Release(n)
	}
}

// ended returns why the subscription ended, or nil while it runs.
func (sub *subscription) ended() error {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.endErr
}

// end stops the subscription with err (the first reason wins), leaves
// the hub and gives back its read budget once Next has returned.
func (sub *subscription) end(err error) {
	sub.mu.Lock()
	first := sub.endErr == nil
	if first {
		sub.endErr = err
	}
	sub.mu.Unlock()
	if !first {
		return
	}
	sub.cancel()
	sub.svc.hub.remove(sub, sub.topics)
	sub.nextMu.Lock()
	defer sub.nextMu.Unlock()
	sub.hold.Close()
	sub.dropShared()
	sub.shareHold.Close()
	sub.buf, sub.sizes, sub.lastSize = nil, nil, 0
}

// Close ends the subscription; Next then fails with an error wrapping
// [ports.ErrClosed].
func (sub *subscription) Close() error {
	sub.stop()
	sub.end(fmt.Errorf("subscription: %w", ports.ErrClosed))
	return nil
}

var _ ports.Subscription = (*subscription)(nil)
