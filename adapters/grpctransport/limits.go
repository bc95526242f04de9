package grpctransport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/regroup-mls/regroup/ports"
)

// Limit names, as [ServerStats.Refused] and the errors name them.
const (
	LimitConnections              = "connections"
	LimitConnectionsPerIdentity   = "connections_per_identity"
	LimitSubscriptions            = "subscriptions"
	LimitSubscriptionsPerConn     = "subscriptions_per_connection"
	LimitSubscriptionsPerIdentity = "subscriptions_per_identity"
	LimitCursorsPerConn           = "cursors_per_connection"
	LimitCursorsPerIdentity       = "cursors_per_identity"
	LimitRateConnection           = "rate_connection"
	LimitRateIdentity             = "rate_identity"
	LimitRateGlobal               = "rate_global"
)

// LimitNames returns the name of every limit a [Server] enforces.
func LimitNames() []string { return append([]string(nil), limitNames...) }

var limitNames = []string{LimitConnections, LimitConnectionsPerIdentity, LimitSubscriptions,
	LimitSubscriptionsPerConn, LimitSubscriptionsPerIdentity, LimitCursorsPerConn, LimitCursorsPerIdentity,
	LimitRateConnection, LimitRateIdentity, LimitRateGlobal,
	LimitConnectionsPerAddress, LimitSubscriptionsPerAddress, LimitCursorsPerAddress, LimitCursors,
	LimitAnonymousSubscriptionsPerAddr, LimitAnonymousCursorsPerAddr, LimitRateAddress, LimitQueuedBytes}

// ServerStats is a snapshot of a [Server]'s gauges and counters, for
// metrics: every limit refusal, shed slow readers, hidden internal
// errors.
type ServerStats struct {
	// Connections and Subscriptions are open now.
	Connections, Subscriptions int64
	// Refused counts refusals per limit name (the Limit constants).
	Refused map[string]int64
	// SlowReadersShed counts subscription streams ended because their
	// reader stopped taking envelopes.
	SlowReadersShed int64
	// DecodeFailures counts requests that did not decode.
	DecodeFailures int64
	// HiddenErrors counts failures answered with a bare "unavailable"
	// whose details went to the server log only.
	HiddenErrors int64
}

// meter holds the counters behind [ServerStats].
type meter struct {
	connections, subscriptions atomic.Int64
	refused                    map[string]*atomic.Int64
	shed, decode, hidden       atomic.Int64
}

func newMeter() *meter {
	m := &meter{refused: map[string]*atomic.Int64{}}
	for _, n := range limitNames {
		m.refused[n] = new(atomic.Int64)
	}
	return m
}

// Stats returns the server's counters now.
func (s *Server) Stats() ServerStats {
	st := ServerStats{
		Connections: s.meter.connections.Load(), Subscriptions: s.meter.subscriptions.Load(),
		Refused:         map[string]int64{},
		SlowReadersShed: s.meter.shed.Load(), DecodeFailures: s.meter.decode.Load(), HiddenErrors: s.meter.hidden.Load(),
	}
	for n, c := range s.meter.refused {
		st.Refused[n] = c.Load()
	}
	return st
}

// refuse counts a refusal by limit and returns the error a caller sees,
// wrapping ports.ErrRateLimited (gRPC ResourceExhausted).
func (s *Server) refuse(limit, format string, args ...any) error {
	s.meter.refused[limit].Add(1)
	return fmt.Errorf("%w: %s limit: %s", ports.ErrRateLimited, limit, fmt.Sprintf(format, args...))
}

func newLimiter(perSecond float64, burst int) *rate.Limiter {
	if perSecond < 0 {
		return rate.NewLimiter(rate.Inf, 0)
	}
	return rate.NewLimiter(rate.Limit(perSecond), burst)
}

// identity is the shared state of every connection that proved one
// installation key: its rate limiter and its counts (COMP-145).
type identity struct {
	key     string
	limiter *rate.Limiter
	conns   int
	subs    int
	cursors int
}

// registry holds the identities with an authenticated connection or an
// open subscription; an identity with neither is dropped.
type registry struct {
	mu    sync.Mutex
	ids   map[string]*identity
	addrs map[string]*address
	// subs and cursors count the server's open subscriptions and the
	// topics they follow; mu also guards the counts kept in each conn,
	// identity and address.
	subs, cursors int
}

// usage is what one subscription holds, to be given back at its end.
type usage struct {
	conn      *conn
	id        *identity
	addr      *address
	anonymous bool
	cursors   int
}

// bindIdentity moves connection c to the identity of key, refusing when
// that identity already has its maximum of connections.
func (s *Server) bindIdentity(c *conn, key []byte) error {
	r := &s.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.id != nil && c.id.key == string(key) {
		return nil
	}
	id := r.ids[string(key)]
	if id == nil {
		id = &identity{key: string(key), limiter: newLimiter(s.opts.IdentityRatePerSecond, s.opts.IdentityBurst)}
	}
	if max := s.opts.MaxConnectionsPerIdentity; max > 0 && id.conns >= max {
		return s.refuse(LimitConnectionsPerIdentity, "installation already has %d authenticated connections", id.conns)
	}
	r.ids[string(key)] = id
	id.conns++
	if c.id != nil {
		c.id.conns--
		r.prune(c.id)
	}
	c.id = id
	return nil
}

// unbind drops connection c from its identity when it closes.
func (s *Server) unbind(c *conn) {
	r := &s.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.id != nil {
		c.id.conns--
		r.prune(c.id)
		c.id = nil
	}
}

func (r *registry) prune(id *identity) {
	if id.conns <= 0 && id.subs <= 0 {
		delete(r.ids, id.key)
	}
}

// reserve takes one subscription of cursors cursors against the
// connection's, its identity's and the server's limits, or refuses.
func (s *Server) reserve(c *conn, cursors int) (*usage, error) {
	r := &s.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	o := s.opts
	switch {
	case o.MaxSubscriptions > 0 && r.subs >= o.MaxSubscriptions:
		return nil, s.refuse(LimitSubscriptions, "the server has %d open subscriptions", r.subs)
	case o.MaxSubscriptionsPerConnection > 0 && c.subs >= o.MaxSubscriptionsPerConnection:
		return nil, s.refuse(LimitSubscriptionsPerConn, "connection has %d open subscriptions", c.subs)
	case o.MaxCursorsPerConnection > 0 && c.cursors+cursors > o.MaxCursorsPerConnection:
		return nil, s.refuse(LimitCursorsPerConn, "connection would follow %d topics, limit %d", c.cursors+cursors, o.MaxCursorsPerConnection)
	}
	if err := s.reserveAddress(c, cursors); err != nil {
		return nil, err
	}
	id := c.id
	if id != nil {
		switch {
		case o.MaxSubscriptionsPerIdentity > 0 && id.subs >= o.MaxSubscriptionsPerIdentity:
			return nil, s.refuse(LimitSubscriptionsPerIdentity, "installation has %d open subscriptions", id.subs)
		case o.MaxCursorsPerIdentity > 0 && id.cursors+cursors > o.MaxCursorsPerIdentity:
			return nil, s.refuse(LimitCursorsPerIdentity, "installation would follow %d topics, limit %d", id.cursors+cursors, o.MaxCursorsPerIdentity)
		}
		id.subs++
		id.cursors += cursors
	}
	r.subs++
	c.subs++
	c.cursors += cursors
	s.countAddress(c.addr, id == nil, cursors, 1)
	s.meter.subscriptions.Add(1)
	return &usage{conn: c, id: id, addr: c.addr, anonymous: id == nil, cursors: cursors}, nil
}

// free gives back what reserve took.
func (s *Server) free(u *usage) {
	r := &s.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	r.subs--
	u.conn.subs--
	u.conn.cursors -= u.cursors
	if u.id != nil {
		u.id.subs--
		u.id.cursors -= u.cursors
		r.prune(u.id)
	}
	s.countAddress(u.addr, u.anonymous, u.cursors, -1)
	s.meter.subscriptions.Add(-1)
}

// limiters returns the token buckets a call on c draws from: the
// connection's, its identity's (when authenticated) and the server's.
func (s *Server) limiters(c *conn) [4]*rate.Limiter {
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	var id, addr *rate.Limiter
	if c.id != nil {
		id = c.id.limiter
	}
	if c.addr != nil {
		addr = c.addr.limiter
	}
	return [4]*rate.Limiter{c.limiter, id, addr, s.global}
}

// The global bucket comes last: a call refused by its own connection's,
// identity's or address's bucket spends nothing of everyone's (COMP-327).
var rateLimits = [4]string{LimitRateConnection, LimitRateIdentity, LimitRateAddress, LimitRateGlobal}

// charge takes n tokens from every bucket of c now, or refuses the call
// (and takes none) when one of them has too few (COMP-146).
func (s *Server) charge(c *conn, n int) error {
	now := time.Now()
	var taken []*rate.Reservation
	for i, l := range s.limiters(c) {
		if l == nil || l.Limit() == rate.Inf {
			continue
		}
		r := l.ReserveN(now, min(n, l.Burst()))
		if !r.OK() || r.DelayFrom(now) > 0 {
			wait := r.DelayFrom(now)
			r.CancelAt(now)
			for _, t := range taken {
				t.CancelAt(now)
			}
			return &refusedCall{wait: wait, error: s.refuse(rateLimits[i], "call costs %d tokens, the %s bucket refills at %.0f per second", n, rateLimits[i], float64(l.Limit()))}
		}
		taken = append(taken, r)
	}
	return nil
}

// debit takes n tokens from every bucket of c after the work was done,
// going into debt: the following calls wait for the refill.
func (s *Server) debit(c *conn, n int) {
	if n <= 0 {
		return
	}
	now := time.Now()
	for _, l := range s.limiters(c) {
		if l != nil && l.Limit() != rate.Inf {
			l.ReserveN(now, min(n, l.Burst()))
		}
	}
}

// wait takes n tokens from every bucket of c, waiting for them within
// ctx: a subscription's deliveries slow down instead of failing.
func (s *Server) wait(ctx context.Context, c *conn, n int) error {
	for _, l := range s.limiters(c) {
		if l != nil && l.Limit() != rate.Inf {
			if err := l.WaitN(ctx, min(n, l.Burst())); err != nil {
				return err
			}
		}
	}
	return nil
}

// cost is the token cost of moving envelopes of the given total size: one
// per envelope and one per started 64 KiB (COMP-146).
func cost(envelopes, bytes int) int {
	return envelopes + (bytes+64<<10-1)/(64<<10)
}

// sharedCost is the token cost of sending one stream a message shared
// with other streams (COMP-558): one per envelope and one per started
// 256 KiB. The read, decode and encode behind it are done once for all
// of them; what each stream costs is the write.
func sharedCost(envelopes, bytes int) int {
	return envelopes + (bytes+256<<10-1)/(256<<10)
}

// Listener returns l limited to the server's MaxConnections: a
// connection beyond it is closed at once (and counted), so the clients
// already connected keep their memory and CPU (COMP-145).
func (s *Server) Listener(l net.Listener) net.Listener {
	return &limitListener{Listener: l, s: s}
}

type limitListener struct {
	net.Listener
	s *Server
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		m := l.s.meter
		if max := l.s.opts.MaxConnections; max > 0 && m.connections.Load() >= int64(max) {
			m.refused[LimitConnections].Add(1)
			c.Close()
			continue
		}
		addr, ok := l.s.admitConnection(addressKey(c.RemoteAddr()))
		if !ok {
			c.Close()
			continue
		}
		m.connections.Add(1)
		cc := &countedConn{Conn: c, s: l.s, key: c.RemoteAddr().String(), addr: addr}
		l.s.rawMu.Lock()
		l.s.raws[cc.key] = cc
		l.s.rawMu.Unlock()
		return cc, nil
	}
}

// countedConn is an accepted connection, counted until it closes.
type countedConn struct {
	net.Conn
	s    *Server
	key  string
	addr *address
	once sync.Once
	// progress counts the bytes written to the network (COMP-322) and
	// wakes the waits for room (COMP-559).
	progress writeProgress
}

func (c *countedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.progress.wrote(n)
	}
	return n, err
}

func (c *countedConn) Close() error {
	c.once.Do(func() {
		c.s.dropConnection(c.addr)
		c.s.meter.connections.Add(-1)
		c.s.rawMu.Lock()
		delete(c.s.raws, c.key)
		c.s.rawMu.Unlock()
	})
	return c.Conn.Close()
}

// raw returns the accepted connection whose peer is remote.
func (s *Server) raw(remote string) *countedConn {
	s.rawMu.Lock()
	defer s.rawMu.Unlock()
	if c, ok := s.raws[remote]; ok {
		return c
	}
	return nil
}

// refusedCall is a refusal by a rate bucket, with how long until the
// bucket would have had the tokens.
type refusedCall struct {
	error
	wait time.Duration
}

func (r *refusedCall) Unwrap() error { return r.error }

// maxRefusalDelay bounds how long a refusal is held back.
const maxRefusalDelay = time.Second

// tarpit holds back the answer to a refused call (COMP-331): until the
// refusing bucket would have had the tokens (at most a second), or a
// second for a storage quota. A client that floods with calls it is
// refused gets answers no faster than its buckets refill, so the refusals
// cost the server little CPU; an honest client is never refused.
func (s *Server) tarpit(ctx context.Context, err error) {
	var d time.Duration
	var r *refusedCall
	switch {
	case errors.As(err, &r):
		d = r.wait
	case errors.Is(err, ports.ErrRateLimited):
		d = maxRefusalDelay
	default:
		return
	}
	t := time.NewTimer(min(d, maxRefusalDelay))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-s.closing.Done():
	}
}
