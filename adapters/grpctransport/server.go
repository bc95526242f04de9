// Package grpctransport carries the delivery service over gRPC: a
// [Server] that serves a [ports.DeliveryService] (the service definition is
// proto/deliverypb), and a [Client] that implements [ports.Transport]
// against it — reconnecting, honouring ctx deadlines, re-proving its
// installation key on each new connection, and resuming subscriptions from
// the last delivered cursor with no gap and no duplicate.
//
// # Connections
//
// Each connection has its own state: the latest challenge the server
// issued on it, the installation key it proved (Ed25519ctx signature with
// context [ports.AuthContext] over that challenge), and a token-bucket rate
// limit on its calls.
//
// # Errors
//
// [ToStatus] and [FromStatus] map the ports sentinels to gRPC codes and
// back, so errors.Is works across the wire.
package grpctransport

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/deliverypb"
)

// ServerOptions configures a [Server]. Zero fields select the defaults.
type ServerOptions struct {
	// RatePerSecond is each connection's sustained call rate; default 1000.
	// Negative disables the limit.
	RatePerSecond float64
	// Burst is each connection's burst of calls; default 2000.
	Burst int
	// MaxMessageBytes bounds one request message; default 16 MiB.
	MaxMessageBytes int
	// Logger receives connection and error events; default slog.Default().
	Logger *slog.Logger
}

// Server serves a [ports.DeliveryService] over gRPC.
type Server struct {
	deliverypb.UnimplementedDeliveryServer
	svc  ports.DeliveryService
	opts ServerOptions

	// closing ends every subscription stream when the server shuts down.
	closing context.Context
	stop    context.CancelFunc
}

// NewServer returns a server for svc.
func NewServer(svc ports.DeliveryService, opts *ServerOptions) *Server {
	var o ServerOptions
	if opts != nil {
		o = *opts
	}
	if o.RatePerSecond == 0 {
		o.RatePerSecond = 1000
	}
	if o.Burst <= 0 {
		o.Burst = 2000
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = 16 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Server{svc: svc, opts: o}
	s.closing, s.stop = context.WithCancel(context.Background())
	return s
}

// GRPCServer returns a gRPC server with the delivery service registered
// and the per-connection state (authentication, rate limit) installed.
// extra adds options such as transport credentials.
func (s *Server) GRPCServer(extra ...grpc.ServerOption) *grpc.Server {
	opts := append([]grpc.ServerOption{
		grpc.StatsHandler(connTagger{s}),
		grpc.UnaryInterceptor(s.unary),
		grpc.StreamInterceptor(s.stream),
		grpc.MaxRecvMsgSize(s.opts.MaxMessageBytes),
		grpc.MaxConcurrentStreams(256),
		// Clients ping idle connections (a subscription may be silent for
		// hours); allow that, and drop peers that stop answering.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second}),
	}, extra...)
	gs := grpc.NewServer(opts...)
	deliverypb.RegisterDeliveryServer(gs, s)
	return gs
}

// Shutdown ends every open subscription stream (clients resume them
// elsewhere or after a restart); call it before grpc.Server.GracefulStop.
func (s *Server) Shutdown() { s.stop() }

// subscribedHeader is the response header by which the server tells the
// client it accepted a subscription.
const subscribedHeader = "regroup-subscribed"

// conn is one connection's state.
type conn struct {
	limiter *rate.Limiter

	mu        sync.Mutex
	challenge []byte
	caller    ports.Caller
}

func (c *conn) getCaller() ports.Caller {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.caller
}

type connKey struct{}

// connTagger attaches a fresh conn to each connection's context.
type connTagger struct{ s *Server }

func (t connTagger) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	lim := rate.NewLimiter(rate.Inf, 0)
	if t.s.opts.RatePerSecond > 0 {
		lim = rate.NewLimiter(rate.Limit(t.s.opts.RatePerSecond), t.s.opts.Burst)
	}
	return context.WithValue(ctx, connKey{}, &conn{limiter: lim})
}
func (connTagger) HandleConn(context.Context, stats.ConnStats)                     {}
func (connTagger) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (connTagger) HandleRPC(context.Context, stats.RPCStats)                       {}

func connOf(ctx context.Context) (*conn, error) {
	c, ok := ctx.Value(connKey{}).(*conn)
	if !ok {
		return nil, ToStatus(fmt.Errorf("%w: no connection state", ports.ErrUnavailable))
	}
	return c, nil
}

func (s *Server) admit(ctx context.Context) error {
	c, err := connOf(ctx)
	if err != nil {
		return err
	}
	if !c.limiter.Allow() {
		return ToStatus(fmt.Errorf("%w: connection exceeded %.0f calls per second", ports.ErrRateLimited, s.opts.RatePerSecond))
	}
	return nil
}

func (s *Server) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := s.admit(ctx); err != nil {
		s.opts.Logger.Debug("call refused", "method", info.FullMethod, "err", err)
		return nil, err
	}
	start := time.Now()
	resp, err := h(ctx, req)
	if err != nil {
		s.opts.Logger.Debug("call failed", "method", info.FullMethod, "code", status.Code(err).String(),
			"err", err, "duration", time.Since(start))
	}
	return resp, err
}

func (s *Server) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := s.admit(ss.Context()); err != nil {
		return err
	}
	return h(srv, ss)
}

// Challenge implements deliverypb.DeliveryServer.
func (s *Server) Challenge(ctx context.Context, _ *deliverypb.ChallengeRequest) (*deliverypb.ChallengeResponse, error) {
	c, err := connOf(ctx)
	if err != nil {
		return nil, err
	}
	ch := make([]byte, 32)
	if _, err := rand.Read(ch); err != nil {
		return nil, ToStatus(fmt.Errorf("%w: %v", ports.ErrUnavailable, err))
	}
	c.mu.Lock()
	c.challenge = ch
	c.mu.Unlock()
	return &deliverypb.ChallengeResponse{Challenge: ch}, nil
}

// Authenticate implements deliverypb.DeliveryServer. A challenge is good
// for one attempt.
func (s *Server) Authenticate(ctx context.Context, req *deliverypb.AuthenticateRequest) (*deliverypb.AuthenticateResponse, error) {
	c, err := connOf(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	ch := c.challenge
	c.challenge = nil
	c.mu.Unlock()
	if ch == nil {
		return nil, ToStatus(fmt.Errorf("authenticate: %w: no challenge issued on this connection", ports.ErrUnauthenticated))
	}
	caller, err := s.svc.Authenticate(ctx, ch, req.GetInstallationKey(), req.GetSignature())
	if err != nil {
		return nil, ToStatus(err)
	}
	c.mu.Lock()
	c.caller = caller
	c.mu.Unlock()
	return &deliverypb.AuthenticateResponse{}, nil
}

func callerOf(ctx context.Context) ports.Caller {
	c, err := connOf(ctx)
	if err != nil {
		return ports.Caller{}
	}
	return c.getCaller()
}

// Publish implements deliverypb.DeliveryServer.
func (s *Server) Publish(ctx context.Context, req *deliverypb.PublishRequest) (*deliverypb.PublishResponse, error) {
	ids, err := s.svc.Publish(ctx, callerOf(ctx), req.GetEnvelopes())
	if err != nil {
		return nil, ToStatus(err)
	}
	return &deliverypb.PublishResponse{SequenceIds: ids}, nil
}

// Query implements deliverypb.DeliveryServer.
func (s *Server) Query(ctx context.Context, req *deliverypb.QueryRequest) (*deliverypb.QueryResponse, error) {
	envs, err := s.svc.Query(ctx, callerOf(ctx), req.GetTopic(), req.GetAfter(), int(req.GetLimit()))
	if err != nil {
		return nil, ToStatus(err)
	}
	return &deliverypb.QueryResponse{Envelopes: envs}, nil
}

// QueryNewest implements deliverypb.DeliveryServer.
func (s *Server) QueryNewest(ctx context.Context, req *deliverypb.QueryNewestRequest) (*deliverypb.QueryNewestResponse, error) {
	e, err := s.svc.QueryNewest(ctx, callerOf(ctx), req.GetTopic())
	if err != nil {
		return nil, ToStatus(err)
	}
	return &deliverypb.QueryNewestResponse{Envelope: e}, nil
}

// HighestSequenceId implements deliverypb.DeliveryServer.
func (s *Server) HighestSequenceId(ctx context.Context, req *deliverypb.HighestSequenceIdRequest) (*deliverypb.HighestSequenceIdResponse, error) {
	n, err := s.svc.HighestSequenceID(ctx, callerOf(ctx), req.GetTopic())
	if err != nil {
		return nil, ToStatus(err)
	}
	return &deliverypb.HighestSequenceIdResponse{SequenceId: n}, nil
}

// Subscribe implements deliverypb.DeliveryServer: it sends the response
// headers once the service accepted the subscription, then one message per
// envelope, until the client goes away or the server shuts down.
func (s *Server) Subscribe(req *deliverypb.SubscribeRequest, stream grpc.ServerStreamingServer[deliverypb.SubscribeResponse]) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	stopAfter := context.AfterFunc(s.closing, cancel)
	defer stopAfter()
	cursors := make([]ports.TopicCursor, len(req.GetCursors()))
	for i, c := range req.GetCursors() {
		cursors[i] = ports.TopicCursor{Topic: c.GetTopic(), After: c.GetAfter()}
	}
	sub, err := s.svc.Subscribe(ctx, callerOf(ctx), cursors)
	if err != nil {
		return ToStatus(err)
	}
	defer sub.Close()
	if err := stream.SendHeader(metadata.Pairs(subscribedHeader, "1")); err != nil {
		return err
	}
	for {
		e, err := sub.Next(ctx)
		if err != nil {
			if s.closing.Err() != nil {
				return ToStatus(fmt.Errorf("%w: server shutting down", ports.ErrUnavailable))
			}
			if stream.Context().Err() != nil {
				return nil
			}
			s.opts.Logger.Warn("subscription ended", "err", err)
			return ToStatus(err)
		}
		if err := stream.Send(&deliverypb.SubscribeResponse{Envelopes: []*backendpb.OriginatorEnvelope{e}}); err != nil {
			return err
		}
	}
}
