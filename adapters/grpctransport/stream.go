package grpctransport

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/deliverypb"
)

// Subscribe implements deliverypb.DeliveryServer: it takes the
// subscription's place under the connection's, identity's and server's
// limits, sends the response headers once the service accepted it, then
// one message per envelope, until the client goes away or the server
// shuts down. Each delivered envelope costs tokens; when the buckets are
// empty the stream waits. A reader that does not take the envelope being
// sent for SlowReaderTimeout is shed: its connection is closed, which
// frees everything queued for it, and the client resubscribes from its
// cursor (COMP-145).
func (s *Server) Subscribe(req *deliverypb.SubscribeRequest, stream grpc.ServerStreamingServer[deliverypb.SubscribeResponse]) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	stopAfter := context.AfterFunc(s.closing, cancel)
	defer stopAfter()
	c, err := connOf(ctx)
	if err != nil {
		return err
	}
	cursors := make([]ports.TopicCursor, len(req.GetCursors()))
	for i, cur := range req.GetCursors() {
		cursors[i] = ports.TopicCursor{Topic: cur.GetTopic(), After: cur.GetAfter()}
	}
	if err := s.charge(c, len(cursors)); err != nil {
		return s.status(ctx, err)
	}
	u, err := s.reserve(c, len(cursors))
	if err != nil {
		return s.status(ctx, err)
	}
	defer s.free(u)
	sub, err := s.svc.Subscribe(ctx, c.getCaller(), cursors)
	if err != nil {
		return s.status(ctx, err)
	}
	defer sub.Close()
	if err := stream.SendHeader(metadata.Pairs(subscribedHeader, "1")); err != nil {
		return err
	}
	var sending atomic.Int64 // when the Send in progress started (Unix ns), 0 when none
	done := make(chan error, 1)
	go func() { done <- s.pump(ctx, c, sub, stream, &sending) }()
	tick := time.NewTicker(max(s.opts.SlowReaderTimeout/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			since := sending.Load()
			if since == 0 || time.Since(time.Unix(0, since)) < s.opts.SlowReaderTimeout {
				continue
			}
			s.meter.shed.Add(1)
			s.opts.Logger.Info("slow reader shed", "waited", time.Since(time.Unix(0, since)).Round(time.Millisecond),
				"installation", fmt.Sprintf("%x", c.getCaller().InstallationKey))
			cancel()
			if c.raw != nil {
				c.raw.Close()
			}
			return s.status(ctx, fmt.Errorf("%w: slow reader: no envelope taken for %s; resubscribe from the last cursor",
				ports.ErrUnavailable, s.opts.SlowReaderTimeout))
		}
	}
}

// bufferedSubscription is an optional interface of a [ports.Subscription]
// (core/delivery's has it): TryNext hands out an envelope it already
// holds, without reading or waiting, or reports false. The server then
// sends what a subscription holds in one message instead of one message
// per envelope.
type bufferedSubscription interface {
	TryNext() (*backendpb.OriginatorEnvelope, bool)
}

// One subscription message holds at most maxSendEnvelopes envelopes and,
// beyond its first envelope, maxSendBytes of them.
const (
	maxSendEnvelopes = 128
	maxSendBytes     = 256 << 10
)

// pump moves envelopes from sub to the stream until one side ends,
// several per message when sub holds them already.
func (s *Server) pump(ctx context.Context, c *conn, sub ports.Subscription, stream grpc.ServerStreamingServer[deliverypb.SubscribeResponse], sending *atomic.Int64) error {
	for {
		if err := s.awaitRoom(ctx, c); err != nil {
			return s.status(ctx, err)
		}
		var (
			e     *backendpb.OriginatorEnvelope
			share shareFunc
			err   error
		)
		if ss, ok := sub.(sharedSubscription); ok {
			e, share, err = ss.NextShared(ctx)
		} else {
			e, err = sub.Next(ctx)
		}
		if err != nil {
			if s.closing.Err() != nil {
				return s.status(ctx, exposed{fmt.Errorf("%w: server shutting down", ports.ErrUnavailable)}) // an answer, not a failure to log
			}
			if stream.Context().Err() != nil || ctx.Err() != nil {
				return nil
			}
			s.opts.Logger.Warn("subscription ended", "err", err)
			return s.status(ctx, err)
		}
		size := proto.Size(e)
		if share != nil && size >= minSharedBytes {
			sent, err := s.sendShared(ctx, c, stream, e, share, sending)
			if errors.Is(err, errStreamStop) {
				return nil
			}
			if err != nil {
				return err
			}
			if sent {
				continue
			}
		}
		msg := &deliverypb.SubscribeResponse{Envelopes: []*backendpb.OriginatorEnvelope{e}}
		if b, ok := sub.(bufferedSubscription); ok {
			for len(msg.Envelopes) < maxSendEnvelopes && size < maxSendBytes {
				more, ok := b.TryNext()
				if !ok {
					break
				}
				msg.Envelopes = append(msg.Envelopes, more)
				size += proto.Size(more)
			}
		}
		if err := s.wait(ctx, c, cost(len(msg.Envelopes), size)); err != nil {
			return nil // ctx ended while waiting for tokens
		}
		if err := s.queue(ctx, c, proto.Size(msg), nil); err != nil {
			return nil // ctx ended while waiting for read budget
		}
		sending.Store(time.Now().UnixNano())
		err = stream.Send(msg)
		sending.Store(0)
		if err != nil {
			return err
		}
	}
}

// shareFunc is [delivery.ShareFunc]: it builds a value once for every
// subscription handed the same shared envelope, charging its bytes to
// the read budget once, and holds it until release.
type shareFunc = func(ctx context.Context, key any, build func() (v any, bytes int64, err error)) (v any, release func(), err error)

// sharedSubscription is an optional interface of a [ports.Subscription]
// (core/delivery's has it): NextShared is Next, and when the envelope is
// shared with other subscriptions (one commit woke them all), share
// builds what they all send, once. The envelope is then shared: the
// server only encodes it.
type sharedSubscription interface {
	NextShared(ctx context.Context) (*backendpb.OriginatorEnvelope, shareFunc, error)
}

// An envelope of at least minSharedBytes that other subscriptions share
// is sent alone, in a message encoded once for all of them (COMP-557);
// a smaller one is sent with what the subscription holds, encoded per
// stream.
const minSharedBytes = 16 << 10

// preparedResponse is a subscription message encoded once.
type preparedResponse struct {
	msg  *grpc.PreparedMsg
	size int
}

// errStreamStop is a stream's ctx ending while a send waited.
var errStreamStop = errors.New("stream stopped")

// sendShared sends shared envelope e as the one message every stream
// handed e sends (COMP-557): encoded once per compression, its bytes
// charged to the read budget once for all the connections it is queued
// on, its tokens at the shared cost. It reports false when e cannot be
// sent that way; the caller then sends it as its own message.
func (s *Server) sendShared(ctx context.Context, c *conn, stream grpc.ServerStreamingServer[deliverypb.SubscribeResponse], e *backendpb.OriginatorEnvelope, share shareFunc, sending *atomic.Int64) (bool, error) {
	enc, ok := sendCompression(stream.Context())
	if !ok {
		return false, nil
	}
	v, release, err := share(ctx, sharedKey{enc}, func() (any, int64, error) {
		msg := &deliverypb.SubscribeResponse{Envelopes: []*backendpb.OriginatorEnvelope{e}}
		pm := new(grpc.PreparedMsg)
		if err := pm.Encode(stream, msg); err != nil {
			return nil, 0, err
		}
		n := proto.Size(msg)
		return preparedResponse{msg: pm, size: n}, int64(n), nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return false, errStreamStop
		}
		return false, nil
	}
	pr := v.(preparedResponse)
	if err := s.wait(ctx, c, sharedCost(1, pr.size)); err != nil {
		release()
		return false, errStreamStop // ctx ended while waiting for tokens
	}
	s.queueHeld(c, pr.size, release)
	sending.Store(time.Now().UnixNano())
	err = stream.SendMsg(pr.msg)
	sending.Store(0)
	return true, err
}

// sharedKey names the encoded form of a shared envelope: one per
// compression the streams answer with.
type sharedKey struct{ encoding string }

// sendCompression returns the compression a stream's responses use: the
// request's, which the server answers with (it sets none of its own).
func sendCompression(ctx context.Context) (string, bool) {
	st, ok := grpc.ServerTransportStreamFromContext(ctx).(interface{ RecvCompress() string })
	if !ok {
		return "", false
	}
	return st.RecvCompress(), true
}
