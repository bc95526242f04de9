package grpctransport

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/deliverypb"
)

// ClientOptions configures a [Client]. Zero fields select the defaults.
type ClientOptions struct {
	// InstallationKey proves the client's installation on each connection.
	// Nil makes the client anonymous: it can read capability and public
	// topics only.
	InstallationKey ed25519.PrivateKey
	// TLS, when set, secures the connection; nil connects in plaintext
	// (loopback and tests).
	TLS *tls.Config
	// MaxMessageBytes bounds one message either way; default 16 MiB, the
	// server's default.
	MaxMessageBytes int
	// ResubscribeBackoff is the first delay before a broken subscription
	// stream is re-opened; it doubles up to 2s. Default 50ms.
	ResubscribeBackoff time.Duration
	// DialOptions are appended to the client's gRPC dial options.
	DialOptions []grpc.DialOption
}

// Client is a [ports.Transport] to a regroupd, or to several regroupd
// replicas sharing one database ([DialReplicas]). gRPC reconnects it after
// a broken connection; a call that needs an identity re-proves the
// installation key on the new connection by itself.
type Client struct {
	eps  []*endpoint
	next atomic.Uint64
	opts ClientOptions
	// sessions counts successful authentications ([ports.SessionCounter]).
	sessions atomic.Uint64
}

// endpoint is one regroupd address and the connection to it. Each
// connection proves the installation key by itself.
type endpoint struct {
	target string
	cc     *grpc.ClientConn
	api    deliverypb.DeliveryClient
	authMu sync.Mutex
}

var _ ports.Transport = (*Client)(nil)

// Dial returns a client for the regroupd at target (host:port). It does not
// wait for a connection: calls fail with [ports.ErrUnavailable] while none
// can be made.
func Dial(target string, opts *ClientOptions) (*Client, error) {
	return DialReplicas([]string{target}, opts)
}

// DialReplicas returns a client that spreads its calls over the regroupd
// replicas at targets, which must share one database (docs/operations.md:
// replicas over PostgreSQL). Each call goes to the next replica in turn
// whose connection is ready, skipping replicas that cannot be reached, so
// a replica that goes away costs only the calls in flight on it. A read
// (Query, QueryNewest, HighestSequenceID, opening a subscription) that
// fails unavailable is tried on the next replica; a Publish is not, since
// its outcome is unknown (see [ports.Transport.Publish]) — the caller's
// retry goes to the next replica. A subscription resumes on another
// replica from its cursors when its stream breaks. Like [Dial], it does
// not wait for connections.
func DialReplicas(targets []string, opts *ClientOptions) (*Client, error) {
	if len(targets) == 0 {
		return nil, fmt.Errorf("dial: %w: no target", ports.ErrInvalidArgument)
	}
	var o ClientOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = 16 << 20
	}
	if o.ResubscribeBackoff <= 0 {
		o.ResubscribeBackoff = 50 * time.Millisecond
	}
	creds := insecure.NewCredentials()
	if o.TLS != nil {
		creds = credentials.NewTLS(o.TLS)
	}
	dopts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(o.MaxMessageBytes), grpc.MaxCallSendMsgSize(o.MaxMessageBytes)),
		// Reconnect soon after a restart rather than after gRPC's 1s base.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 3 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
		// Notice a dead connection under a silent subscription.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}),
	}, o.DialOptions...)
	c := &Client{opts: o}
	for _, target := range targets {
		cc, err := grpc.NewClient(target, dopts...)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("dial %s: %w: %v", target, ports.ErrUnavailable, err)
		}
		c.eps = append(c.eps, &endpoint{target: target, cc: cc, api: deliverypb.NewDeliveryClient(cc)})
	}
	return c, nil
}

// Close closes the connections; later calls fail with
// [ports.ErrUnavailable].
func (c *Client) Close() error {
	var errs []error
	for _, ep := range c.eps {
		errs = append(errs, ep.cc.Close())
	}
	return errors.Join(errs...)
}

// pick returns the endpoint of the next call: the next in turn whose
// connection is ready; when none is, the next in turn that may become
// ready (idle or connecting, which it starts); otherwise the next in
// turn. avoid, when another endpoint qualifies as well, is passed over.
func (c *Client) pick(avoid *endpoint) *endpoint {
	n := len(c.eps)
	start := int(c.next.Add(1) % uint64(n))
	var ready, maybe, any *endpoint
	for i := range n {
		ep := c.eps[(start+i)%n]
		if any == nil || any == avoid {
			any = ep
		}
		switch ep.cc.GetState() {
		case connectivity.Ready:
			if ready == nil || ready == avoid {
				ready = ep
			}
		case connectivity.Idle, connectivity.Connecting:
			ep.cc.Connect()
			if maybe == nil || maybe == avoid {
				maybe = ep
			}
		}
	}
	switch {
	case ready != nil:
		return ready
	case maybe != nil:
		return maybe
	}
	return any
}

// authenticate proves the installation key on ep's current connection.
func (c *Client) authenticate(ctx context.Context, ep *endpoint) error {
	ep.authMu.Lock()
	defer ep.authMu.Unlock()
	ch, err := ep.api.Challenge(ctx, &deliverypb.ChallengeRequest{})
	if err != nil {
		return err
	}
	sig, err := c.opts.InstallationKey.Sign(nil, ch.GetChallenge(), &ed25519.Options{Context: ports.AuthContext})
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	_, err = ep.api.Authenticate(ctx, &deliverypb.AuthenticateRequest{
		InstallationKey: c.opts.InstallationKey.Public().(ed25519.PublicKey), Signature: sig,
	})
	if err == nil {
		c.sessions.Add(1)
	}
	return err
}

var _ ports.SessionCounter = (*Client)(nil)

// Sessions implements [ports.SessionCounter]: how many times a connection
// of this client authenticated.
func (c *Client) Sessions() uint64 { return c.sessions.Load() }

// call runs fn on one endpoint; when it fails Unauthenticated and the
// client has a key (the connection is new, or was never authenticated),
// it authenticates and runs fn once more on that endpoint. A retryable
// call (a read) that fails unavailable while ctx lasts is tried on the
// other endpoints in turn.
func (c *Client) call(ctx context.Context, op string, retryable bool, fn func(ep *endpoint) error) error {
	attempts := 1
	if retryable {
		attempts = len(c.eps)
	}
	var last *endpoint
	for a := 1; ; a++ {
		ep := c.pick(last)
		err := c.callOn(ctx, ep, op, fn)
		if err == nil || a >= attempts || ctx.Err() != nil || !errors.Is(err, ports.ErrUnavailable) {
			return err
		}
		last = ep
	}
}

func (c *Client) callOn(ctx context.Context, ep *endpoint, op string, fn func(ep *endpoint) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w: %w", op, ports.ErrUnavailable, err)
	}
	err := fn(ep)
	if status.Code(err) == codes.Unauthenticated && c.opts.InstallationKey != nil {
		if aerr := c.authenticate(ctx, ep); aerr != nil {
			return FromStatus(ctx, op+": authenticate", aerr)
		}
		err = fn(ep)
	}
	return FromStatus(ctx, op, err)
}

// Publish implements [ports.Transport.Publish].
func (c *Client) Publish(ctx context.Context, envs []*backendpb.ClientEnvelope) ([]uint64, error) {
	req := &deliverypb.PublishRequest{Envelopes: envs}
	if n := proto.Size(req); n > c.opts.MaxMessageBytes {
		return nil, fmt.Errorf("publish: %w: batch is %d bytes, message limit %d", ports.ErrInvalidArgument, n, c.opts.MaxMessageBytes)
	}
	var resp *deliverypb.PublishResponse
	err := c.call(ctx, "publish", false, func(ep *endpoint) (err error) {
		resp, err = ep.api.Publish(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(resp.GetSequenceIds()) != len(envs) {
		return nil, fmt.Errorf("publish: %w: server returned %d ids for %d envelopes", ports.ErrUnavailable, len(resp.GetSequenceIds()), len(envs))
	}
	return resp.GetSequenceIds(), nil
}

// Query implements [ports.Transport.Query].
func (c *Client) Query(ctx context.Context, topic []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error) {
	if limit < 0 {
		limit = 0
	}
	var resp *deliverypb.QueryResponse
	err := c.call(ctx, "query", true, func(ep *endpoint) (err error) {
		resp, err = ep.api.Query(ctx, &deliverypb.QueryRequest{Topic: topic, After: after, Limit: uint32(min(limit, 1<<31))})
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp.GetEnvelopes(), nil
}

// QueryNewest implements [ports.Transport.QueryNewest].
func (c *Client) QueryNewest(ctx context.Context, topic []byte) (*backendpb.OriginatorEnvelope, error) {
	var resp *deliverypb.QueryNewestResponse
	err := c.call(ctx, "query newest", true, func(ep *endpoint) (err error) {
		resp, err = ep.api.QueryNewest(ctx, &deliverypb.QueryNewestRequest{Topic: topic})
		return err
	})
	if err != nil {
		return nil, err
	}
	if resp.GetEnvelope() == nil {
		return nil, fmt.Errorf("query newest: %w: server returned no envelope", ports.ErrUnavailable)
	}
	return resp.GetEnvelope(), nil
}

// HighestSequenceID implements [ports.Transport.HighestSequenceID].
func (c *Client) HighestSequenceID(ctx context.Context, topic []byte) (uint64, error) {
	var resp *deliverypb.HighestSequenceIdResponse
	err := c.call(ctx, "highest sequence id", true, func(ep *endpoint) (err error) {
		resp, err = ep.api.HighestSequenceId(ctx, &deliverypb.HighestSequenceIdRequest{Topic: topic})
		return err
	})
	if err != nil {
		return 0, err
	}
	return resp.GetSequenceId(), nil
}

// permanent reports whether a subscription error will recur on retry.
func permanent(err error) bool {
	return errors.Is(err, ports.ErrInvalidArgument) || errors.Is(err, ports.ErrUnauthenticated) ||
		errors.Is(err, ports.ErrNotFound)
}
