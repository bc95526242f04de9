package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// subscriptions are the several subscriptions that together follow every
// topic of the client (COMP-277): a delivery service bounds the topics of
// one subscription, so a client in more conversations than that opens as
// many as it needs, each of at most Options.SubscriptionTopics topics.
type subscriptions struct {
	subs []ports.Subscription
}

// subscribeAll opens subscriptions over cursors, in chunks of at most
// limit topics. A chunk the service refuses for its rates
// ([ports.ErrRateLimited]) is tried again after a pause while the ones
// already open stay open, so that a client whose subscriptions cost more
// tokens than one burst still gets every one (COMP-278). Any other
// failure closes what was opened and is returned.
func subscribeAll(ctx context.Context, tr ports.Transport, cursors []ports.TopicCursor, limit int) (*subscriptions, error) {
	s := &subscriptions{}
	for start := 0; start < len(cursors); start += limit {
		chunk := cursors[start:min(start+limit, len(cursors))]
		sub, err := subscribeRetry(ctx, tr, chunk)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("subscription %d of %d (%d topics): %w", start/limit+1, (len(cursors)+limit-1)/limit, len(chunk), err)
		}
		s.subs = append(s.subs, sub)
	}
	return s, nil
}

// subscribeRetry opens one subscription, waiting out rate refusals.
func subscribeRetry(ctx context.Context, tr ports.Transport, cursors []ports.TopicCursor) (ports.Subscription, error) {
	wait := 250 * time.Millisecond
	for {
		sub, err := tr.Subscribe(ctx, cursors)
		if err == nil || !errors.Is(err, ports.ErrRateLimited) {
			return sub, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, errors.Join(err, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, 4*time.Second)
	}
}

// run reads every subscription until ctx ends: each envelope goes to
// arrived, and the first failure of any subscription to failed.
func (s *subscriptions) run(ctx context.Context, arrived chan<- *backendpb.OriginatorEnvelope, failed chan<- error) {
	for _, sub := range s.subs {
		go func() {
			for {
				env, err := sub.Next(ctx)
				if err != nil {
					select {
					case failed <- err:
					default:
					}
					return
				}
				select {
				case arrived <- env:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
}

func (s *subscriptions) close() {
	for _, sub := range s.subs {
		_ = sub.Close()
	}
}
