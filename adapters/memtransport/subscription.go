package memtransport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// subscription tracks the last delivered sequence id of each topic and
// drops anything at or below it, so a re-opened service subscription never
// yields a duplicate.
type subscription struct {
	t   *Transport
	ctx context.Context

	mu      sync.Mutex
	inner   ports.Subscription
	cursors []ports.TopicCursor
	index   map[string]int
	closed  bool
}

// Next implements [ports.Subscription.Next].
func (s *subscription) Next(ctx context.Context) (*backendpb.OriginatorEnvelope, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, fmt.Errorf("subscription: %w", ports.ErrClosed)
		}
		inner := s.inner
		s.mu.Unlock()
		e, err := inner.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, ports.ErrUnavailable) && s.ctx.Err() == nil {
				// Back off before re-reading a service that just failed.
				select {
				case <-time.After(100 * time.Millisecond):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				if rerr := s.reopen(); rerr != nil {
					return nil, rerr
				}
				continue
			}
			return nil, err
		}
		s.mu.Lock()
		i, ok := s.index[string(e.GetEnvelope().GetTargetTopic())]
		if !ok || e.GetSequenceId() <= s.cursors[i].After {
			s.mu.Unlock()
			continue
		}
		s.cursors[i].After = e.GetSequenceId()
		s.mu.Unlock()
		return e, nil
	}
}

func (s *subscription) reopen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("subscription: %w", ports.ErrClosed)
	}
	_ = s.inner.Close()
	cs := append([]ports.TopicCursor(nil), s.cursors...)
	inner, err := s.t.svc.Subscribe(s.ctx, s.t.caller, cs)
	if err != nil {
		return fmt.Errorf("resubscribe: %w", err)
	}
	s.inner = inner
	return nil
}

// Close implements [ports.Subscription.Close].
func (s *subscription) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.inner.Close()
}
