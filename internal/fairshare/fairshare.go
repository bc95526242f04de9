// Package fairshare is a byte budget shared by principals (a connection,
// an installation key, a source address): every hold counts against the
// whole budget and against a share of each principal it is made for, so
// one principal that keeps its bytes (a subscriber that stops reading)
// waits on its own share while the others keep reading (COMP-321).
//
// The transport names the principals of a call in its context
// ([WithPrincipals]); the delivery service holds read bytes for them.
package fairshare

import (
	"context"
	"sync"
	"sync/atomic"
)

// Principal is one party a hold is charged to: Key names it (the caller
// picks a prefix per kind, "addr:", "conn:"…), Share bounds the bytes its
// holds may take together, Kind names its class in the wait counters.
type Principal struct {
	Key   string
	Kind  string
	Share int64
}

type principalsKey struct{}

// WithPrincipals returns ctx carrying ps, the principals of the call.
func WithPrincipals(ctx context.Context, ps ...Principal) context.Context {
	return context.WithValue(ctx, principalsKey{}, ps)
}

// From returns the principals ctx carries, nil when none.
func From(ctx context.Context) []Principal {
	ps, _ := ctx.Value(principalsKey{}).([]Principal)
	return ps
}

// Budget is a byte budget with per-principal shares. A hold larger than
// a gate's size is granted when the gate is otherwise empty, so one
// oversize read still proceeds alone.
type Budget struct {
	global *gate
	// minShare raises every share to at least this many bytes (one read).
	minShare int64

	mu     sync.Mutex
	shares map[string]*gate
	waits  map[string]*atomic.Int64
}

// New returns a budget of size bytes in which no share is below minShare.
func New(size, minShare int64) *Budget {
	return &Budget{global: newGate(size), minShare: minShare, shares: map[string]*gate{}, waits: map[string]*atomic.Int64{}}
}

// InUse returns the bytes held now.
func (b *Budget) InUse() int64 {
	b.global.mu.Lock()
	defer b.global.mu.Unlock()
	return b.global.held
}

// Waits returns, per principal kind ("global" for the whole budget), how
// many holds had to wait because that share was full.
func (b *Budget) Waits() map[string]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]int64, len(b.waits))
	for k, v := range b.waits {
		out[k] = v.Load()
	}
	return out
}

func (b *Budget) waitCounter(kind string) *atomic.Int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.waits[kind]
	if c == nil {
		c = new(atomic.Int64)
		b.waits[kind] = c
	}
	return c
}

// gates returns the gates of ps (created on first use, each referenced
// once more), then the global one.
func (b *Budget) gates(ps []Principal) []*gate {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]*gate, 0, len(ps)+1)
	for _, p := range ps {
		if p.Share <= 0 {
			continue
		}
		g := b.shares[p.Key]
		if g == nil {
			g = newGate(max(p.Share, b.minShare))
			g.key, g.kind = p.Key, p.Kind
			b.shares[p.Key] = g
		}
		g.refs++
		out = append(out, g)
	}
	return append(out, b.global)
}

// unref drops one reference of each principal gate, forgetting a gate
// nobody references.
func (b *Budget) unref(gs []*gate) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, g := range gs {
		if g == b.global {
			continue
		}
		if g.refs--; g.refs == 0 {
			delete(b.shares, g.key)
		}
	}
}

// Hold is bytes held for a set of principals; Release gives them back,
// in parts or at once. A Hold is used by one goroutine at a time.
type Hold struct {
	b     *Budget
	gates []*gate
	n     int64
}

// Acquire holds n bytes for the principals ps (and the whole budget),
// waiting within ctx for each share in turn, then for the budget.
func (b *Budget) Acquire(ctx context.Context, ps []Principal, n int64) (*Hold, error) {
	h := &Hold{b: b, gates: b.gates(ps)}
	if err := h.Grow(ctx, n); err != nil {
		b.unref(h.gates)
		return nil, err
	}
	return h, nil
}

// AcquireShares is Acquire against the principals' shares only, not
// the whole budget: bytes counted in the budget once already (a page
// several principals' readers share) still count against the share of
// each principal that keeps them.
func (b *Budget) AcquireShares(ctx context.Context, ps []Principal, n int64) (*Hold, error) {
	gs := b.gates(ps)
	h := &Hold{b: b, gates: gs[:len(gs)-1]} // the global gate comes last
	if err := h.Grow(ctx, n); err != nil {
		b.unref(h.gates)
		return nil, err
	}
	return h, nil
}

// Grow holds n more bytes for the same principals.
func (h *Hold) Grow(ctx context.Context, n int64) error {
	if n <= 0 {
		return nil
	}
	for i, g := range h.gates {
		err := g.acquire(ctx, n, func() {
			kind := g.kind
			if g == h.b.global {
				kind = "global"
			}
			h.b.waitCounter(kind).Add(1)
		})
		if err != nil {
			for _, d := range h.gates[:i] {
				d.release(n)
			}
			return err
		}
	}
	h.n += n
	return nil
}

// Held returns the bytes the hold has now.
func (h *Hold) Held() int64 { return h.n }

// Release gives back n of the held bytes (all of them when n exceeds
// what is held); the hold stays usable for Grow.
func (h *Hold) Release(n int64) {
	n = min(n, h.n)
	if n <= 0 {
		return
	}
	h.n -= n
	for _, g := range h.gates {
		g.release(n)
	}
}

// Close releases everything and drops the hold's principals.
func (h *Hold) Close() {
	if h == nil || h.gates == nil {
		return
	}
	h.Release(h.n)
	h.b.unref(h.gates)
	h.gates = nil
}

// gate is a FIFO counting semaphore that admits an oversize request when
// it holds nothing.
type gate struct {
	key, kind string
	refs      int // guarded by Budget.mu

	mu      sync.Mutex
	size    int64
	held    int64
	waiters []*waiter
}

type waiter struct {
	n     int64
	ready chan struct{}
}

func newGate(size int64) *gate { return &gate{size: size} }

func (g *gate) fits(n int64) bool { return g.held == 0 || g.held+n <= g.size }

// acquire takes n, waiting in order within ctx; onWait is called when
// it starts waiting.
func (g *gate) acquire(ctx context.Context, n int64, onWait func()) error {
	g.mu.Lock()
	if len(g.waiters) == 0 && g.fits(n) {
		g.held += n
		g.mu.Unlock()
		return nil
	}
	w := &waiter{n: n, ready: make(chan struct{})}
	g.waiters = append(g.waiters, w)
	g.mu.Unlock()
	onWait()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		select {
		case <-w.ready: // granted meanwhile: give it back
			g.mu.Unlock()
			g.release(n)
			return ctx.Err()
		default:
		}
		for i, x := range g.waiters {
			if x == w {
				g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
				break
			}
		}
		g.grant()
		g.mu.Unlock()
		return ctx.Err()
	}
}

func (g *gate) release(n int64) {
	g.mu.Lock()
	g.held -= n
	g.grant()
	g.mu.Unlock()
}

// grant admits waiters in order while the first fits. g.mu is held.
func (g *gate) grant() {
	for len(g.waiters) > 0 && g.fits(g.waiters[0].n) {
		w := g.waiters[0]
		g.waiters = g.waiters[1:]
		g.held += w.n
		close(w.ready)
	}
}

// Handoff carries the holds of reads whose bytes outlive the call that
// read them: a transport puts one in the call's context
// ([WithHandoff]); the service gives it the read's hold instead of
// closing it, and the transport closes it once the response has left the
// process, so the bytes count in the budget from the read to the write.
type Handoff struct {
	mu    sync.Mutex
	holds []*Hold
}

type handoffKey struct{}

// WithHandoff returns ctx carrying h.
func WithHandoff(ctx context.Context, h *Handoff) context.Context {
	return context.WithValue(ctx, handoffKey{}, h)
}

// Keep gives hold to the handoff ctx carries, or closes it when ctx
// carries none.
func Keep(ctx context.Context, hold *Hold) {
	h, _ := ctx.Value(handoffKey{}).(*Handoff)
	if h == nil {
		hold.Close()
		return
	}
	h.mu.Lock()
	h.holds = append(h.holds, hold)
	h.mu.Unlock()
}

// Take returns the holds given so far and forgets them.
func (h *Handoff) Take() []*Hold {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.holds
	h.holds = nil
	return out
}
