package grpctransport

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/deliverypb"
)

// subscription pumps a server stream into out. When the stream breaks for
// a reason that may pass (a restart, a lost connection), it re-opens it
// from the last sequence id of each topic it has handed to out, and drops
// anything at or below that id, so the caller sees no gap and no duplicate.
type subscription struct {
	c       *Client
	cursors []ports.TopicCursor
	index   map[string]int

	out    chan *backendpb.OriginatorEnvelope
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	err    error
	closed bool
}

// Subscribe implements [ports.Transport.Subscribe]. It returns once the
// server accepted the subscription, or with the server's refusal.
func (c *Client) Subscribe(ctx context.Context, cursors []ports.TopicCursor) (ports.Subscription, error) {
	s := &subscription{c: c, index: map[string]int{}, out: make(chan *backendpb.OriginatorEnvelope, 64), done: make(chan struct{})}
	for i, cur := range cursors {
		s.cursors = append(s.cursors, ports.TopicCursor{Topic: append([]byte(nil), cur.Topic...), After: cur.After})
		s.index[string(cur.Topic)] = i
	}
	s.ctx, s.cancel = context.WithCancel(ctx)
	stream, err := s.open(ctx)
	if err != nil {
		s.cancel()
		return nil, err
	}
	go s.pump(stream)
	return s, nil
}

// open starts a stream from the current cursors and waits for the
// server's acceptance (its response headers).
func (s *subscription) open(ctx context.Context) (grpc.ServerStreamingClient[deliverypb.SubscribeResponse], error) {
	req := &deliverypb.SubscribeRequest{}
	for _, cur := range s.cursors {
		req.Cursors = append(req.Cursors, &deliverypb.TopicCursor{Topic: cur.Topic, After: cur.After})
	}
	var stream grpc.ServerStreamingClient[deliverypb.SubscribeResponse]
	err := s.c.call(ctx, "subscribe", true, func(ep *endpoint) error {
		st, err := ep.api.Subscribe(s.ctx, req)
		if err != nil {
			return err
		}
		md, err := st.Header()
		if err != nil {
			return err
		}
		if len(md.Get(subscribedHeader)) == 0 {
			// Ended without accepting: the status says why.
			if err := st.RecvMsg(new(deliverypb.SubscribeResponse)); err != nil {
				return err
			}
			return status.Error(codes.Internal, "subscription stream started without acceptance")
		}
		stream = st
		return nil
	})
	return stream, err
}

func (s *subscription) pump(stream grpc.ServerStreamingClient[deliverypb.SubscribeResponse]) {
	defer close(s.done)
	backoff := s.c.opts.ResubscribeBackoff
	for {
		err := s.receive(stream)
		if s.ctx.Err() != nil {
			s.fail(fmt.Errorf("subscription: %w: %w", ports.ErrClosed, s.ctx.Err()))
			return
		}
		perr := FromStatus(s.ctx, "subscription", err)
		if permanent(perr) {
			s.fail(perr)
			return
		}
		// Re-open from the cursors of what out has been given.
		for {
			select {
			case <-time.After(backoff):
			case <-s.ctx.Done():
				s.fail(fmt.Errorf("subscription: %w: %w", ports.ErrClosed, s.ctx.Err()))
				return
			}
			backoff = min(2*backoff, 2*time.Second)
			stream, err = s.open(s.ctx)
			if err == nil {
				backoff = s.c.opts.ResubscribeBackoff
				break
			}
			if permanent(err) {
				s.fail(err)
				return
			}
		}
	}
}

// receive forwards envelopes until the stream ends, and returns why.
func (s *subscription) receive(stream grpc.ServerStreamingClient[deliverypb.SubscribeResponse]) error {
	for {
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		for _, e := range resp.GetEnvelopes() {
			// Read what the cursor needs before handing e over: from then
			// on e belongs to the caller, who may change it.
			i, ok := s.index[string(e.GetEnvelope().GetTargetTopic())]
			id := e.GetSequenceId()
			if !ok || id <= s.cursors[i].After {
				continue // a duplicate after a re-open, or not ours
			}
			select {
			case s.out <- e:
				s.cursors[i].After = id
			case <-s.ctx.Done():
				return s.ctx.Err()
			}
		}
	}
}

func (s *subscription) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

// Next implements [ports.Subscription.Next].
func (s *subscription) Next(ctx context.Context) (*backendpb.OriginatorEnvelope, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("subscription: %w", ports.ErrClosed)
	}
	select {
	case e := <-s.out:
		return e, nil
	case <-s.done:
		select {
		case e := <-s.out:
			return e, nil
		default:
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return nil, fmt.Errorf("subscription: %w", ports.ErrClosed)
		}
		return nil, s.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close implements [ports.Subscription.Close].
func (s *subscription) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	<-s.done
	return nil
}
