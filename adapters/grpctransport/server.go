// Package grpctransport carries the delivery service over gRPC: a
// [Server] that serves a [ports.DeliveryService] (the service definition is
// proto/deliverypb), and a [Client] that implements [ports.Transport]
// against it, or against several replicas sharing one database
// ([DialReplicas], COMP-149) — reconnecting, honouring ctx deadlines,
// re-proving its installation key on each new connection, and resuming
// subscriptions from the last delivered cursor with no gap and no
// duplicate. A subscription stream carries several envelopes per message
// when the service's subscription holds them already.
//
// # Connections
//
// Each connection has its own state: the latest challenge the server
// issued on it, the installation key it proved (Ed25519ctx signature with
// context [ports.AuthContext] over that challenge), and its counts.
//
// # Limits
//
// Every call draws tokens, by its cost, from four buckets: its
// connection's, its installation key's, its source address's and, last,
// the server's (COMP-146, COMP-327); a refused call is answered when the
// bucket would have refilled (COMP-331). Subscriptions and the topics
// they follow are capped per connection, per installation key, per
// source address (anonymous ones the least) and for the server;
// connections per installation key and, through [Server.Listener], per
// address and for the server (COMP-145, COMP-326); a subscriber that
// stops taking envelopes has its connection closed (COMP-145). Each call
// names its principals to the service, which shares its read budget
// between them (COMP-321), and a connection's unwritten responses are
// bounded and keep their read budget until written (COMP-322).
// [ServerOptions] documents each limit and [Server.Stats] counts what
// they refuse.
//
// # Errors
//
// [ToStatus] and [FromStatus] map the ports sentinels to gRPC codes and
// back, so errors.Is works across the wire. Only the reasons of errors a
// client causes cross it; any other failure is answered "unavailable"
// and logged by the server (COMP-147). A request that does not decode is
// InvalidArgument (COMP-148). A refusal by a limit is ResourceExhausted
// ([ports.ErrRateLimited]) naming the limit.
package grpctransport

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/internal/fairshare"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/deliverypb"
)

// ServerOptions configures a [Server]. Zero fields select the defaults;
// docs/operations.md lists every limit with its regroupd flag and metric.
// A rate of tokens is spent per call and per envelope moved (see
// COMP-146): a call costs 1, a publish 1 more per envelope and per
// started 64 KiB, a query as much for what it returned, a subscribe 1 per
// cursor, and each envelope a subscription delivers 1 plus 1 per started
// 64 KiB, or per started 256 KiB when it is sent in a message encoded once
// for several streams (COMP-558).
type ServerOptions struct {
	// RatePerSecond is each connection's token rate; default 1000.
	// Negative disables the per-connection limit.
	RatePerSecond float64
	// Burst is each connection's bucket size; default 2000.
	Burst int
	// IdentityRatePerSecond is the token rate shared by every connection
	// of one installation key; default 4000. Negative disables it.
	IdentityRatePerSecond float64
	// IdentityBurst is that bucket's size; default 8000.
	IdentityBurst int
	// GlobalRatePerSecond is the token rate of the whole server; default
	// 20000. Negative disables it.
	GlobalRatePerSecond float64
	// GlobalBurst is that bucket's size; default 40000.
	GlobalBurst int
	// MaxConnections bounds the open connections of the server (enforced
	// by [Server.Listener]); default 1024. Negative disables it.
	MaxConnections int
	// MaxConnectionsPerIdentity bounds the connections authenticated as
	// one installation key; default 8. Negative disables it.
	MaxConnectionsPerIdentity int
	// MaxStreamsPerConnection bounds the calls in flight on one
	// connection (HTTP/2 concurrent streams); default 32.
	MaxStreamsPerConnection uint32
	// MaxSubscriptions bounds the open subscriptions of the server;
	// default 4096. Negative disables it.
	MaxSubscriptions int
	// MaxSubscriptionsPerConnection bounds one connection's open
	// subscriptions; default 32. Negative disables it.
	MaxSubscriptionsPerConnection int
	// MaxSubscriptionsPerIdentity bounds one installation key's open
	// subscriptions over all its connections; default 32. Negative
	// disables it.
	MaxSubscriptionsPerIdentity int
	// MaxCursorsPerConnection bounds the topics one connection's open
	// subscriptions follow together; default 24576. Negative disables it.
	MaxCursorsPerConnection int
	// MaxCursorsPerIdentity bounds the topics one installation key's open
	// subscriptions follow together; default 24576. Negative disables it.
	MaxCursorsPerIdentity int
	// SlowReaderTimeout ends a subscription stream whose reader has not
	// taken the envelope being sent for this long; the client resubscribes
	// from its cursor and loses nothing. Default 30s.
	SlowReaderTimeout time.Duration
	// MaxConnectionIdle closes a connection with no call in flight for
	// this long; default 5m.
	MaxConnectionIdle time.Duration
	// MaxMessageBytes bounds one request message; default 16 MiB.
	MaxMessageBytes int
	// Per source address (an IPv4 address or an IPv6 /64), over all its
	// connections, anonymous or not (COMP-326). MaxConnectionsPerAddress
	// (enforced by [Server.Listener]) defaults to 64,
	// MaxSubscriptionsPerAddress to 256, MaxCursorsPerAddress to 32768;
	// the anonymous subscriptions of an address get the smallest share:
	// AnonymousSubscriptionsPerAddress defaults to 16 and
	// AnonymousCursorsPerAddress to 1024. Negative disables a limit.
	MaxConnectionsPerAddress, MaxSubscriptionsPerAddress, MaxCursorsPerAddress int
	AnonymousSubscriptionsPerAddress, AnonymousCursorsPerAddress               int
	// MaxCursors bounds the topics all open subscriptions of the server
	// follow together; default 262144. Negative disables it.
	MaxCursors int
	// AddressRatePerSecond is the token rate shared by every connection
	// from one address; default 2000. Negative disables it.
	AddressRatePerSecond float64
	// AddressBurst is that bucket's size; default 4000.
	AddressBurst int
	// Read-budget shares (COMP-321): the bytes of the service's read
	// budget the reads and queued responses of one connection, one
	// installation key, one address, and the anonymous connections of one
	// address may hold together. Defaults 16, 32, 64 and 16 MiB, each
	// raised by the service to at least one page; negative disables one.
	ConnectionReadShare, IdentityReadShare, AddressReadShare, AnonymousReadShare int64
	// MaxQueuedBytesPerConnection bounds the response bytes a connection
	// may have queued and not yet written before its next read waits
	// (COMP-322); default 4 MiB. ResponseProgressTimeout closes a
	// connection whose queued responses wrote nothing for that long while
	// a read waited; default SlowReaderTimeout.
	MaxQueuedBytesPerConnection int64
	ResponseProgressTimeout     time.Duration
	// MaxReadsPerConnection bounds the Query and QueryNewest calls of one
	// connection that read at once; default 4.
	MaxReadsPerConnection int
	// InitialWindowSize and InitialConnWindowSize are the HTTP/2 receive
	// windows per stream and per connection (fixed, so gRPC's automatic
	// window growth cannot buffer more); defaults 64 KiB and 1 MiB.
	InitialWindowSize, InitialConnWindowSize int32
	// KeyPackageCost is the extra tokens one published key package costs
	// for its admission checks; default 16. SignatureCost is the extra
	// tokens of an identity update or a commit-log entry, whose
	// signatures admission verifies; default 4. Negative charges nothing.
	KeyPackageCost, SignatureCost int
	// Logger receives connection and error events, and the details of
	// every failure a client sees only as "unavailable"; default
	// slog.Default().
	Logger *slog.Logger
}

func (o *ServerOptions) withDefaults() ServerOptions {
	var r ServerOptions
	if o != nil {
		r = *o
	}
	rate := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	pos := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	rate(&r.RatePerSecond, 1000)
	rate(&r.IdentityRatePerSecond, 4000)
	rate(&r.GlobalRatePerSecond, 20000)
	for _, b := range []struct {
		v *int
		d int
	}{{&r.Burst, 2000}, {&r.IdentityBurst, 8000}, {&r.GlobalBurst, 40000}, {&r.MaxMessageBytes, 16 << 20}} {
		if *b.v <= 0 {
			*b.v = b.d
		}
	}
	pos(&r.MaxConnections, 1024)
	pos(&r.MaxConnectionsPerIdentity, 8)
	pos(&r.MaxSubscriptions, 4096)
	pos(&r.MaxSubscriptionsPerConnection, 32)
	pos(&r.MaxSubscriptionsPerIdentity, 32)
	pos(&r.MaxCursorsPerConnection, 24576)
	pos(&r.MaxCursorsPerIdentity, 24576)
	if r.MaxStreamsPerConnection == 0 {
		r.MaxStreamsPerConnection = 32
	}
	if r.SlowReaderTimeout <= 0 {
		r.SlowReaderTimeout = 30 * time.Second
	}
	if r.MaxConnectionIdle <= 0 {
		r.MaxConnectionIdle = 5 * time.Minute
	}
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	pos(&r.MaxConnectionsPerAddress, 64)
	pos(&r.MaxSubscriptionsPerAddress, 256)
	pos(&r.MaxCursorsPerAddress, 32768)
	pos(&r.AnonymousSubscriptionsPerAddress, 16)
	pos(&r.AnonymousCursorsPerAddress, 1024)
	pos(&r.MaxCursors, 262144)
	pos(&r.KeyPackageCost, 16)
	pos(&r.SignatureCost, 4)
	pos(&r.MaxReadsPerConnection, 4)
	rate(&r.AddressRatePerSecond, 2000)
	if r.AddressBurst <= 0 {
		r.AddressBurst = 4000
	}
	share := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	share(&r.ConnectionReadShare, 16<<20)
	share(&r.IdentityReadShare, 32<<20)
	share(&r.AddressReadShare, 64<<20)
	share(&r.AnonymousReadShare, 16<<20)
	if r.MaxQueuedBytesPerConnection <= 0 {
		r.MaxQueuedBytesPerConnection = 4 << 20
	}
	if r.ResponseProgressTimeout <= 0 {
		r.ResponseProgressTimeout = r.SlowReaderTimeout
	}
	if r.InitialWindowSize <= 0 {
		r.InitialWindowSize = 64 << 10
	}
	if r.InitialConnWindowSize <= 0 {
		r.InitialConnWindowSize = 1 << 20
	}
	return r
}

// Server serves a [ports.DeliveryService] over gRPC.
type Server struct {
	deliverypb.UnimplementedDeliveryServer
	svc  ports.DeliveryService
	opts ServerOptions

	global *rate.Limiter
	reg    registry
	meter  *meter
	rawMu  sync.Mutex
	raws   map[string]*countedConn
	// outConns are the connections with responses queued and not yet
	// written (COMP-322); connSeq numbers connections.
	outMu    sync.Mutex
	outConns map[*conn]struct{}
	connSeq  atomic.Uint64
	// undecodable notes the requests the codec could not decode.
	undecodable sync.Map

	// closing ends every subscription stream when the server shuts down.
	closing context.Context
	stop    context.CancelFunc
}

// NewServer returns a server for svc.
func NewServer(svc ports.DeliveryService, opts *ServerOptions) *Server {
	o := opts.withDefaults()
	s := &Server{svc: svc, opts: o, meter: newMeter(), reg: registry{ids: map[string]*identity{}, addrs: map[string]*address{}}, raws: map[string]*countedConn{},
		outConns: map[*conn]struct{}{},
		global:   newLimiter(o.GlobalRatePerSecond, o.GlobalBurst)}
	s.closing, s.stop = context.WithCancel(context.Background())
	go s.settleLoop()
	return s
}

// GRPCServer returns a gRPC server with the delivery service registered
// and the per-connection state (authentication, limits) installed. Serve
// it on [Server.Listener] so that MaxConnections applies. extra adds
// options such as transport credentials.
func (s *Server) GRPCServer(extra ...grpc.ServerOption) *grpc.Server {
	opts := append([]grpc.ServerOption{
		grpc.StatsHandler(connTagger{s}),
		grpc.ForceServerCodecV2(lenientCodec{base: encoding.GetCodecV2("proto"), failed: &s.undecodable}),
		grpc.UnaryInterceptor(s.unary),
		grpc.StreamInterceptor(s.stream),
		grpc.MaxRecvMsgSize(s.opts.MaxMessageBytes),
		grpc.MaxConcurrentStreams(s.opts.MaxStreamsPerConnection),
		// COMP-322: fixed receive windows, so a peer cannot make the
		// server buffer more than these per stream and per connection.
		grpc.InitialWindowSize(s.opts.InitialWindowSize),
		grpc.InitialConnWindowSize(s.opts.InitialConnWindowSize),
		grpc.MaxHeaderListSize(64 << 10),
		// Clients ping idle connections (a subscription may be silent for
		// hours); allow that, and drop peers that stop answering.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second,
			MaxConnectionIdle: s.opts.MaxConnectionIdle}),
	}, extra...)
	gs := grpc.NewServer(opts...)
	gs.RegisterService(s.serviceDesc(), s)
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

	// raw is the network connection (nil when the server is not served
	// on [Server.Listener]); closing it sheds a slow reader.
	raw *countedConn
	// seq names the connection as a read-budget principal.
	seq   uint64
	out   outbound
	reads chan struct{} // one token per unary read in progress

	// Guarded by the server's registry lock.
	addr          *address
	id            *identity
	subs, cursors int
}

func (c *conn) getCaller() ports.Caller {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.caller
}

type connKey struct{}

// connTagger attaches a fresh conn to each connection's context.
type connTagger struct{ s *Server }

func (t connTagger) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	c := &conn{limiter: newLimiter(t.s.opts.RatePerSecond, t.s.opts.Burst), seq: t.s.connSeq.Add(1),
		reads: make(chan struct{}, t.s.opts.MaxReadsPerConnection)}
	if info != nil && info.RemoteAddr != nil {
		c.raw = t.s.raw(info.RemoteAddr.String())
		t.s.reg.mu.Lock()
		if c.raw != nil {
			c.addr = c.raw.addr
		} else {
			c.addr = t.s.addressFor(addressKey(info.RemoteAddr))
		}
		t.s.reg.mu.Unlock()
	}
	return context.WithValue(ctx, connKey{}, c)
}

func (t connTagger) HandleConn(ctx context.Context, st stats.ConnStats) {
	if _, end := st.(*stats.ConnEnd); end {
		if c, ok := ctx.Value(connKey{}).(*conn); ok {
			t.s.unbind(c)
			t.s.closeOutbound(c)
		}
	}
}

func (connTagger) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (connTagger) HandleRPC(context.Context, stats.RPCStats)                       {}

func connOf(ctx context.Context) (*conn, error) {
	c, ok := ctx.Value(connKey{}).(*conn)
	if !ok {
		return nil, ToStatus(fmt.Errorf("%w: no connection state", ports.ErrUnavailable))
	}
	return c, nil
}

// admit charges a call's base cost of one token.
func (s *Server) admit(ctx context.Context) error {
	c, err := connOf(ctx)
	if err != nil {
		return err
	}
	if err := s.charge(c, 1); err != nil {
		s.tarpit(ctx, err)
		return s.status(ctx, err)
	}
	return nil
}

func (s *Server) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := s.admit(ctx); err != nil {
		s.opts.Logger.Debug("call refused", "method", info.FullMethod, "err", err)
		return nil, err
	}
	start := time.Now()
	resp, err := h(s.withPrincipals(ctx), req)
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
	return h(srv, principalStream{ServerStream: ss, ctx: s.withPrincipals(ss.Context())})
}

// Challenge implements deliverypb.DeliveryServer.
func (s *Server) Challenge(ctx context.Context, _ *deliverypb.ChallengeRequest) (*deliverypb.ChallengeResponse, error) {
	c, err := connOf(ctx)
	if err != nil {
		return nil, err
	}
	ch := make([]byte, 32)
	if _, err := rand.Read(ch); err != nil {
		return nil, s.status(ctx, fmt.Errorf("%w: %v", ports.ErrUnavailable, err))
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
		return nil, s.status(ctx, err)
	}
	if err := s.bindIdentity(c, caller.InstallationKey); err != nil {
		return nil, s.status(ctx, err)
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

// Publish implements deliverypb.DeliveryServer. Beyond the call, it costs
// a token per envelope and per started 64 KiB, taken before the service
// sees the batch.
func (s *Server) Publish(ctx context.Context, req *deliverypb.PublishRequest) (*deliverypb.PublishResponse, error) {
	c, err := connOf(ctx)
	if err != nil {
		return nil, err
	}
	caller := c.getCaller()
	if caller.Authenticated() { // an anonymous publish is refused for free
		n := cost(len(req.GetEnvelopes()), proto.Size(req))
		for _, e := range req.GetEnvelopes() {
			switch {
			case e.GetKeyPackage() != nil:
				n += max(s.opts.KeyPackageCost, 0) // its admission checks cost CPU
			case e.GetIdentityUpdate() != nil, e.GetSealedCommitLogEntry() != nil:
				n += max(s.opts.SignatureCost, 0)
			}
		}
		if err := s.charge(c, n); err != nil {
			s.tarpit(ctx, err)
			return nil, s.status(ctx, err)
		}
	}
	ids, err := s.svc.Publish(ctx, caller, req.GetEnvelopes())
	if err != nil {
		s.tarpit(ctx, err) // a storage quota
		return nil, s.status(ctx, err)
	}
	return &deliverypb.PublishResponse{SequenceIds: ids}, nil
}

// Query implements deliverypb.DeliveryServer. What it returned is charged
// after the read, so the connection's next calls wait for the refill.
func (s *Server) Query(ctx context.Context, req *deliverypb.QueryRequest) (*deliverypb.QueryResponse, error) {
	c, err := connOf(ctx)
	if err != nil {
		return nil, err
	}
	done, err := s.beginRead(ctx, c)
	if err != nil {
		return nil, s.status(ctx, err)
	}
	defer done()
	ho := new(fairshare.Handoff)
	envs, err := s.svc.Query(fairshare.WithHandoff(ctx, ho), c.getCaller(), req.GetTopic(), req.GetAfter(), int(min(req.GetLimit(), 1<<30)))
	if err != nil {
		s.queue(ctx, c, 0, ho) // gives back anything handed over
		return nil, s.status(ctx, err)
	}
	resp := &deliverypb.QueryResponse{Envelopes: envs}
	size := proto.Size(resp)
	s.debit(c, cost(len(envs), size))
	if err := s.queue(ctx, c, size, ho); err != nil {
		return nil, s.status(ctx, err)
	}
	return resp, nil
}

// QueryNewest implements deliverypb.DeliveryServer.
func (s *Server) QueryNewest(ctx context.Context, req *deliverypb.QueryNewestRequest) (*deliverypb.QueryNewestResponse, error) {
	c, err := connOf(ctx)
	if err != nil {
		return nil, err
	}
	done, err := s.beginRead(ctx, c)
	if err != nil {
		return nil, s.status(ctx, err)
	}
	defer done()
	ho := new(fairshare.Handoff)
	e, err := s.svc.QueryNewest(fairshare.WithHandoff(ctx, ho), c.getCaller(), req.GetTopic())
	if err != nil {
		s.queue(ctx, c, 0, ho)
		return nil, s.status(ctx, err)
	}
	// COMP-323: charged by the bytes it moved, like a Query.
	resp := &deliverypb.QueryNewestResponse{Envelope: e}
	size := proto.Size(resp)
	s.debit(c, cost(1, size))
	if err := s.queue(ctx, c, size, ho); err != nil {
		return nil, s.status(ctx, err)
	}
	return resp, nil
}

// HighestSequenceId implements deliverypb.DeliveryServer.
func (s *Server) HighestSequenceId(ctx context.Context, req *deliverypb.HighestSequenceIdRequest) (*deliverypb.HighestSequenceIdResponse, error) {
	n, err := s.svc.HighestSequenceID(ctx, callerOf(ctx), req.GetTopic())
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return &deliverypb.HighestSequenceIdResponse{SequenceId: n}, nil
}
