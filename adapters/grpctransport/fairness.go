package grpctransport

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc"

	"github.com/regroup-mls/regroup/internal/fairshare"
	"github.com/regroup-mls/regroup/ports"
)

// Limits per source address and of the outbound queue, as
// [ServerStats.Refused] and the errors name them (COMP-326, COMP-322).
const (
	LimitConnectionsPerAddress         = "connections_per_address"
	LimitSubscriptionsPerAddress       = "subscriptions_per_address"
	LimitCursorsPerAddress             = "cursors_per_address"
	LimitCursors                       = "cursors"
	LimitAnonymousSubscriptionsPerAddr = "anonymous_subscriptions_per_address"
	LimitAnonymousCursorsPerAddr       = "anonymous_cursors_per_address"
	LimitRateAddress                   = "rate_address"
	LimitQueuedBytes                   = "queued_bytes_no_progress"
)

// addressKey is the principal of a remote address: the IPv4 address, or
// the /64 prefix of an IPv6 one (one host usually holds a whole /64).
func addressKey(a net.Addr) string {
	host := a.String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	ip := net.ParseIP(host)
	switch {
	case ip == nil:
		return host
	case ip.To4() != nil:
		return ip.To4().String()
	default:
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
}

// address is the shared state of every connection from one source
// address: its rate limiter and its counts (COMP-326). It is guarded by
// the registry's lock.
type address struct {
	key                  string
	limiter              *rate.Limiter
	conns, subs, cursors int
	anonSubs, anonCurs   int
}

// addressFor returns the entry of key, created on first use. r.mu is held.
func (s *Server) addressFor(key string) *address {
	r := &s.reg
	a := r.addrs[key]
	if a == nil {
		a = &address{key: key, limiter: newLimiter(s.opts.AddressRatePerSecond, s.opts.AddressBurst)}
		r.addrs[key] = a
	}
	return a
}

func (r *registry) pruneAddress(a *address) {
	if a != nil && a.conns <= 0 && a.subs <= 0 {
		delete(r.addrs, a.key)
	}
}

// admitConnection counts a new connection from key, or refuses it when
// the address has its maximum of connections.
func (s *Server) admitConnection(key string) (*address, bool) {
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	a := s.addressFor(key)
	if max := s.opts.MaxConnectionsPerAddress; max > 0 && a.conns >= max {
		s.meter.refused[LimitConnectionsPerAddress].Add(1)
		s.reg.pruneAddress(a)
		return nil, false
	}
	a.conns++
	return a, true
}

func (s *Server) dropConnection(a *address) {
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	a.conns--
	s.reg.pruneAddress(a)
}

// reserveAddress applies the per-address, anonymous and server-wide
// cursor limits to one more subscription of cursors cursors on c, and
// counts it. r.mu is held.
func (s *Server) reserveAddress(c *conn, cursors int) error {
	o, r, a := s.opts, &s.reg, c.addr
	switch {
	case o.MaxCursors > 0 && r.cursors+cursors > o.MaxCursors:
		return s.refuse(LimitCursors, "the server follows %d topics, limit %d", r.cursors, o.MaxCursors)
	case a == nil:
	case o.MaxSubscriptionsPerAddress > 0 && a.subs >= o.MaxSubscriptionsPerAddress:
		return s.refuse(LimitSubscriptionsPerAddress, "address has %d open subscriptions", a.subs)
	case o.MaxCursorsPerAddress > 0 && a.cursors+cursors > o.MaxCursorsPerAddress:
		return s.refuse(LimitCursorsPerAddress, "address would follow %d topics, limit %d", a.cursors+cursors, o.MaxCursorsPerAddress)
	case c.id == nil && o.AnonymousSubscriptionsPerAddress > 0 && a.anonSubs >= o.AnonymousSubscriptionsPerAddress:
		return s.refuse(LimitAnonymousSubscriptionsPerAddr, "address has %d anonymous subscriptions; authenticate for more", a.anonSubs)
	case c.id == nil && o.AnonymousCursorsPerAddress > 0 && a.anonCurs+cursors > o.AnonymousCursorsPerAddress:
		return s.refuse(LimitAnonymousCursorsPerAddr, "anonymous subscriptions of the address would follow %d topics, limit %d; authenticate for more", a.anonCurs+cursors, o.AnonymousCursorsPerAddress)
	}
	return nil
}

// countAddress adds (sign 1) or removes (sign -1) one subscription of
// cursors cursors, anonymous or not, to the address and server counts.
// r.mu is held.
func (s *Server) countAddress(a *address, anonymous bool, cursors, sign int) {
	s.reg.cursors += sign * cursors
	if a == nil {
		return
	}
	a.subs += sign
	a.cursors += sign * cursors
	if anonymous {
		a.anonSubs += sign
		a.anonCurs += sign * cursors
	}
	if sign < 0 {
		s.reg.pruneAddress(a)
	}
}

// principals returns the read-budget principals of a call on c: its
// connection, its address, its installation key when authenticated, and
// the anonymous connections of its address otherwise (COMP-321).
func (s *Server) principals(c *conn) []fairshare.Principal {
	o := s.opts
	ps := []fairshare.Principal{{Key: fmt.Sprintf("conn:%d", c.seq), Kind: "connection", Share: o.ConnectionReadShare}}
	s.reg.mu.Lock()
	id, a := c.id, c.addr
	s.reg.mu.Unlock()
	if id != nil {
		ps = append(ps, fairshare.Principal{Key: "id:" + id.key, Kind: "identity", Share: o.IdentityReadShare})
	}
	if a != nil {
		ps = append(ps, fairshare.Principal{Key: "addr:" + a.key, Kind: "address", Share: o.AddressReadShare})
		if id == nil {
			ps = append(ps, fairshare.Principal{Key: "anon:" + a.key, Kind: "anonymous", Share: o.AnonymousReadShare})
		}
	}
	return ps
}

// withPrincipals returns ctx naming c's principals for the service.
func (s *Server) withPrincipals(ctx context.Context) context.Context {
	c, err := connOf(ctx)
	if err != nil {
		return ctx
	}
	return fairshare.WithPrincipals(ctx, s.principals(c)...)
}

// principalStream is a server stream whose context names its principals.
type principalStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (p principalStream) Context() context.Context { return p.ctx }

// ReadHolder is an optional interface of a [ports.DeliveryService]
// (core/delivery's has it): HoldRead holds n bytes of the service's read
// budget for the principals ctx carries until release is called. The
// server holds each response's bytes from when it is queued until the
// connection has written as many bytes (COMP-322).
type ReadHolder interface {
	HoldRead(ctx context.Context, n int64) (release func(), err error)
}

// outbound is a connection's count of response bytes queued and not yet
// written, with the read budget held for them.
type outbound struct {
	mu     sync.Mutex
	queued int64 // response bytes queued since the connection opened
	holds  []queuedHold
	closed bool
}

type queuedHold struct {
	mark    int64 // queued total once this response is in
	release func()
}

// written returns the bytes c's network connection has written.
func (c *conn) written() int64 {
	if c.raw == nil {
		return 0
	}
	return c.raw.progress.written.Load()
}

// unsent returns the response bytes queued on c beyond what it wrote.
func (c *conn) unsent() int64 {
	return max(c.queued()-c.written(), 0)
}

// queued returns the response bytes queued on c since it opened.
func (c *conn) queued() int64 {
	c.out.mu.Lock()
	defer c.out.mu.Unlock()
	return c.out.queued
}

// beginRead admits a unary read on c: at most MaxReadsPerConnection at
// once, each starting only when c's unsent responses are at most
// MaxQueuedBytesPerConnection (see awaitRoom). done ends the read, after
// its response was queued. A connection's responses therefore hold at
// most MaxQueuedBytesPerConnection plus MaxReadsPerConnection pages.
func (s *Server) beginRead(ctx context.Context, c *conn) (done func(), err error) {
	if c.raw == nil {
		return func() {}, nil
	}
	select {
	case c.reads <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := s.awaitRoom(ctx, c); err != nil {
		<-c.reads
		return nil, err
	}
	return func() { <-c.reads }, nil
}

// shed closes c because its responses make no progress.
func (s *Server) shed(c *conn, why string) error {
	s.meter.refused[LimitQueuedBytes].Add(1)
	s.opts.Logger.Info("connection shed: responses make no progress", "unsent", c.unsent(), "why", why)
	c.raw.Close()
	return fmt.Errorf("%w: %s limit: responses queued on this connection made no progress for %s",
		ports.ErrRateLimited, LimitQueuedBytes, s.opts.ResponseProgressTimeout)
}

// awaitRoom waits, before a read on c, until c's unsent responses are at
// most MaxQueuedBytesPerConnection. When the connection writes nothing
// for ResponseProgressTimeout meanwhile (a peer that keeps its HTTP/2
// window shut), it is closed and the call fails (COMP-322).
//
// The wait is woken by the write that makes the room (COMP-559), and
// its one timer fires when the connection may have written nothing for
// the timeout: it sheds the connection only if no write was seen since
// the wait started or since the last write it saw, whichever is later.
func (s *Server) awaitRoom(ctx context.Context, c *conn) error {
	if c.raw == nil {
		return nil
	}
	p, limit, timeout := &c.raw.progress, s.opts.MaxQueuedBytesPerConnection, s.opts.ResponseProgressTimeout
	// need is the written total at which c has room; queued bytes only
	// grow, so it is read again after every wake-up.
	need := c.queued() - limit
	last := p.written.Load()
	if last >= need {
		return nil
	}
	since := monotonic() // the last progress seen
	x := newWriteWait()
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		p.register(x, need)
		// Checked after registering: a write that ends before this load
		// is seen here, one that ends after it wakes x.
		if w := p.written.Load(); w >= need {
			p.unregister(x)
			return nil
		} else if w != last {
			last, since = w, p.progressSince(since)
		}
		select {
		case <-ctx.Done():
			p.unregister(x)
			return ctx.Err()
		case <-x.woken:
		case <-t.C:
			p.unregister(x)
			if w := p.written.Load(); w != last {
				last, since = w, p.progressSince(since)
			}
			idle := time.Duration(monotonic() - since)
			if idle >= timeout {
				return s.shed(c, "read waited for room")
			}
			t.Reset(timeout - idle)
		}
		need = c.queued() - limit
	}
}

// queue counts a response of n bytes queued on c and holds read budget
// for it until the connection has written it: the holds the service
// handed over for the read that made it (ho), or else a new hold of n
// bytes.
func (s *Server) queue(ctx context.Context, c *conn, n int, ho *fairshare.Handoff) error {
	var kept []*fairshare.Hold
	if ho != nil {
		kept = ho.Take()
	}
	release := func() {
		for _, h := range kept {
			h.Close()
		}
	}
	if c.raw == nil || n <= 0 {
		release()
		return nil
	}
	if h, ok := s.svc.(ReadHolder); ok && len(kept) == 0 {
		// The response is in memory already: waiting long for budget
		// would pin it outside the budget, so a connection that cannot get
		// it within the progress timeout is shed.
		hctx, cancel := context.WithTimeout(ctx, s.opts.ResponseProgressTimeout)
		r, err := h.HoldRead(hctx, int64(n))
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			return s.shed(c, "no read budget for a response")
		}
		release = r
	}
	s.enqueue(c, n, release)
	return nil
}

// queueHeld counts a response of n bytes queued on c whose bytes the
// read budget holds already, once for every connection it is queued on
// (a shared response, COMP-557); release gives up c's reference to them
// once c has written it.
func (s *Server) queueHeld(c *conn, n int, release func()) {
	if c.raw == nil || n <= 0 {
		release()
		return
	}
	s.enqueue(c, n, release)
}

// enqueue counts n bytes queued on c, to be released once written.
func (s *Server) enqueue(c *conn, n int, release func()) {
	c.out.mu.Lock()
	if c.out.closed {
		c.out.mu.Unlock()
		release()
		return
	}
	c.out.queued += int64(n)
	c.out.holds = append(c.out.holds, queuedHold{mark: c.out.queued, release: release})
	c.out.mu.Unlock()
	s.outMu.Lock()
	s.outConns[c] = struct{}{}
	s.outMu.Unlock()
}

// settle releases the holds of c's responses the connection has written,
// all of them once it closed; it reports whether any remain.
func (c *conn) settle(all bool) bool {
	c.out.mu.Lock()
	w := c.written()
	var done []queuedHold
	i := 0
	for ; i < len(c.out.holds) && (all || c.out.holds[i].mark <= w); i++ {
		done = append(done, c.out.holds[i])
	}
	c.out.holds = c.out.holds[i:]
	if all {
		c.out.closed = true
	}
	left := len(c.out.holds) > 0
	c.out.mu.Unlock()
	for _, h := range done {
		h.release()
	}
	return left
}

// settleLoop releases written responses' holds every few milliseconds
// until the server shuts down.
func (s *Server) settleLoop() {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.closing.Done():
			return
		case <-t.C:
		}
		s.outMu.Lock()
		conns := make([]*conn, 0, len(s.outConns))
		for c := range s.outConns {
			conns = append(conns, c)
		}
		s.outMu.Unlock()
		for _, c := range conns {
			if !c.settle(false) {
				s.outMu.Lock()
				if !c.hasHolds() {
					delete(s.outConns, c)
				}
				s.outMu.Unlock()
			}
		}
	}
}

func (c *conn) hasHolds() bool {
	c.out.mu.Lock()
	defer c.out.mu.Unlock()
	return len(c.out.holds) > 0
}

// closeOutbound releases every hold of a closed connection.
func (s *Server) closeOutbound(c *conn) {
	c.settle(true)
	s.outMu.Lock()
	delete(s.outConns, c)
	s.outMu.Unlock()
}
