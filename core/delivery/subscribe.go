package delivery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// hub wakes the subscriptions of a topic after a commit to it.
type hub struct {
	mu   sync.Mutex
	subs map[string]map[*subscription]struct{}
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
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.subs {
		for s := range m {
			s.wakeUp()
		}
	}
}

func (h *hub) notify(topic []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[string(topic)] {
		s.wakeUp()
	}
}

// subscription reads its topics from their cursors whenever it is woken
// (after a commit to one of them) or its poll interval passes, and hands
// the envelopes to Next in order per topic. Reading from the database
// after each wake, never from the notification itself, is what makes the
// stream gap-free: every envelope at or below a committed id is visible.
type subscription struct {
	svc     *Service
	topics  []string
	cursors []uint64
	wake    chan struct{}
	out     chan *backendpb.OriginatorEnvelope
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
	errMu   sync.Mutex
	err     error
	closeMu sync.Once
}

// Subscribe delivers, for each cursor, every envelope after it in sequence
// id order and then every new one as it is stored. Cursors must name
// distinct readable topics; key-package topics cannot be subscribed to.
func (s *Service) Subscribe(ctx context.Context, caller ports.Caller, cursors []ports.TopicCursor) (ports.Subscription, error) {
	if len(cursors) == 0 {
		return nil, fmt.Errorf("subscribe: %w: no cursors", ports.ErrInvalidArgument)
	}
	if len(cursors) > s.opts.MaxCursors {
		return nil, fmt.Errorf("subscribe: %w: %d cursors, limit %d", ports.ErrInvalidArgument, len(cursors), s.opts.MaxCursors)
	}
	sub := &subscription{
		svc:  s,
		wake: make(chan struct{}, 1),
		out:  make(chan *backendpb.OriginatorEnvelope, 64),
		done: make(chan struct{}),
	}
	seen := make(map[string]bool, len(cursors))
	for i, c := range cursors {
		kind, err := checkRead(caller, c.Topic)
		if err != nil {
			return nil, fmt.Errorf("subscribe: cursor %d: %w", i, err)
		}
		if kind == ports.TopicKeyPackages {
			return nil, fmt.Errorf("subscribe: cursor %d: %w: key-package topics are read with QueryNewest", i, ports.ErrInvalidArgument)
		}
		if seen[string(c.Topic)] {
			return nil, fmt.Errorf("subscribe: cursor %d: %w: topic named twice", i, ports.ErrInvalidArgument)
		}
		seen[string(c.Topic)] = true
		sub.topics = append(sub.topics, string(c.Topic))
		sub.cursors = append(sub.cursors, c.After)
	}
	sub.ctx, sub.cancel = context.WithCancel(context.WithoutCancel(ctx))
	// Register before the first read so that no commit between the read
	// and the registration goes unnoticed.
	s.hub.add(sub, sub.topics)
	sub.wakeUp()
	go sub.run(ctx)
	return sub, nil
}

func (sub *subscription) wakeUp() {
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}

func (sub *subscription) run(parent context.Context) {
	defer close(sub.done)
	defer sub.svc.hub.remove(sub, sub.topics)
	// The poll is operational, not a deadline of any rule, so it runs on
	// a real timer and never shows up as a waiter on a fake clock.
	var pollC <-chan time.Time
	var poll *time.Timer
	if d := sub.svc.opts.PollInterval; d > 0 {
		poll = time.NewTimer(d)
		defer poll.Stop()
		pollC = poll.C
	}
	for {
		select {
		case <-sub.ctx.Done():
			sub.fail(ports.ErrClosed)
			return
		case <-parent.Done():
			sub.fail(fmt.Errorf("%w: subscription context ended: %w", ports.ErrClosed, parent.Err()))
			return
		case <-sub.wake:
		case <-pollC:
		}
		if poll != nil {
			poll.Reset(sub.svc.opts.PollInterval)
		}
		if err := sub.drain(parent); err != nil {
			sub.fail(err)
			return
		}
	}
}

// drain reads every topic from its cursor until it is exhausted.
func (sub *subscription) drain(parent context.Context) error {
	for i, t := range sub.topics {
		for {
			page, err := sub.svc.rangeTopic(sub.ctx, []byte(t), sub.cursors[i], sub.svc.opts.MaxPageSize)
			if err != nil {
				if sub.ctx.Err() != nil || parent.Err() != nil {
					return nil // the loop reports the close
				}
				return fmt.Errorf("subscription read: %w", err)
			}
			for _, e := range page {
				select {
				case sub.out <- e:
					sub.cursors[i] = e.GetSequenceId()
				case <-sub.ctx.Done():
					return nil
				case <-parent.Done():
					return nil
				}
			}
			if len(page) == 0 {
				break
			}
		}
	}
	return nil
}

func (sub *subscription) fail(err error) {
	sub.errMu.Lock()
	if sub.err == nil {
		sub.err = err
	}
	sub.errMu.Unlock()
}

// Next returns the next envelope. Envelopes already read are delivered
// before the end of the subscription is reported.
func (sub *subscription) Next(ctx context.Context) (*backendpb.OriginatorEnvelope, error) {
	select {
	case e := <-sub.out:
		return e, nil
	default:
	}
	select {
	case e := <-sub.out:
		return e, nil
	case <-sub.done:
		select {
		case e := <-sub.out:
			return e, nil
		default:
		}
		sub.errMu.Lock()
		defer sub.errMu.Unlock()
		if errors.Is(sub.err, ports.ErrClosed) {
			return nil, sub.err
		}
		return nil, fmt.Errorf("subscription: %w", sub.err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close ends the subscription; Next then fails with an error wrapping
// [ports.ErrClosed].
func (sub *subscription) Close() error {
	sub.closeMu.Do(func() {
		sub.cancel()
		<-sub.done
		// Drop what was read but not taken: after Close, Next reports the end.
		for {
			select {
			case <-sub.out:
			default:
				return
			}
		}
	})
	return nil
}
