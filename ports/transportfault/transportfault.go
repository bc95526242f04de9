// Package transportfault decorates a [ports.Transport] with a hostile
// delivery service: one that reorders and duplicates what it serves,
// loses requests and answers, injects forged envelopes, lies about the
// newest sequence id of a topic, serves short pages, fails publishes after
// storing them, and ends subscriptions part way through. Tests and demos
// use it to check that a client keeps its promises against an operator
// that may place any bytes at any sequence id.
//
// One [Operator] plays the delivery service for every installation of a
// test: each installation's transport is wrapped with [Operator.Wrap], and
// the operator remembers the envelopes it served, so that it can forge
// with real material — a commit-log entry of another conversation placed
// on this one's topic, a Welcome addressed to another installation, a
// pointee of another Welcome, a message of another group.
//
//	op := transportfault.New(transportfault.Options{Seed: 7, Faults: []transportfault.Fault{transportfault.Reorder}})
//	tr := op.Wrap(inner)
//
// Every decision comes from one pseudo-random source seeded by
// [Options.Seed], so a run whose calls come in the same order meets the
// same faults. Each armed fault fires at a call it applies to with
// probability [Options.Rate]. [Operator.Fired] counts the times a fault
// fired; [Operator.Pause] stops every fault, and [Operator.Resume]
// restarts them.
//
// # What the operator does not do
//
// An answer to a query stays a superset of a prefix of the honest answer:
// the operator does not remove an envelope from the middle of a page and
// serve the envelopes after it, because an envelope that is never served
// is indistinguishable, for the reader, from one that was never
// published. It loses whole requests instead ([Drop]) and serves shorter
// prefixes ([ShortPage]). Forged envelopes at ordinary sequence ids take
// ids inside the gaps of the honest answer; [JunkExtreme] is the forgery
// above every honest id.
//
// # Errors
//
// A request the operator loses fails with an error wrapping
// [ports.ErrUnavailable] and [ErrInjected]. Every other error comes from
// the wrapped transport.
package transportfault

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// ErrInjected is wrapped by every failure the operator injects.
var ErrInjected = errors.New("injected transport fault")

// Fault is one way the delivery service lies or fails.
type Fault int

const (
	// Reorder shuffles the envelopes of an answer.
	Reorder Fault = iota + 1
	// Duplicate serves envelopes of an answer twice, the copy beside the
	// original with the same sequence id.
	Duplicate
	// Drop loses requests: a publish before it is stored, a query's whole
	// answer, and envelopes of a subscription's stream.
	Drop
	// ForgeCommitLog places, in the gaps of a commit-log answer, sealed
	// entries of another conversation's log re-addressed to this one (under
	// the wrong key) and entries of random bytes.
	ForgeCommitLog
	// ForgeWelcome places, in the gaps of a Welcome answer, Welcomes
	// addressed to other installations.
	ForgeWelcome
	// ForgePointee serves further pointees after the first on a pointee's
	// topic, beyond the limit the reader asked for.
	ForgePointee
	// ForgeMessage places, in the gaps of a group-message answer, messages
	// of other groups and messages of random bytes.
	ForgeMessage
	// JunkExtreme appends to an answer an envelope of random bytes at an
	// extreme sequence id: 2^63−1, 2^63 or 2^64−1.
	JunkExtreme
	// NewestUp answers the newest sequence id (API-244) above the topic's,
	// and the newest envelope with a sequence id above its own.
	NewestUp
	// NewestDown answers the newest sequence id below the topic's (0
	// included), and the newest envelope with an older one or not found.
	NewestDown
	// ShortPage serves a shorter prefix of an answer than the service
	// holds.
	ShortPage
	// PublishUnknown stores a publish and then fails it as unavailable:
	// the caller cannot tell it was stored.
	PublishUnknown
	// SubscriptionLoss ends a subscription as unavailable after a few
	// envelopes.
	SubscriptionLoss
)

// All is every fault, in declaration order.
var All = []Fault{Reorder, Duplicate, Drop, ForgeCommitLog, ForgeWelcome, ForgePointee, ForgeMessage,
	JunkExtreme, NewestUp, NewestDown, ShortPage, PublishUnknown, SubscriptionLoss}

var names = map[Fault]string{
	Reorder: "reorder", Duplicate: "duplicate", Drop: "drop", ForgeCommitLog: "forge-commit-log",
	ForgeWelcome: "forge-welcome", ForgePointee: "forge-pointee", ForgeMessage: "forge-message",
	JunkExtreme: "junk-extreme", NewestUp: "newest-up", NewestDown: "newest-down",
	ShortPage: "short-page", PublishUnknown: "publish-unknown", SubscriptionLoss: "subscription-loss",
}

// String returns the fault's name.
func (f Fault) String() string {
	if n, ok := names[f]; ok {
		return n
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// Options configures an [Operator].
type Options struct {
	// Seed seeds every decision.
	Seed uint64
	// Faults are the armed faults.
	Faults []Fault
	// Rate is the probability, in (0, 1], that an armed fault fires at a
	// call it applies to; 0 means 0.3.
	Rate float64
}

// Operator is a hostile delivery service in front of the transports it
// wraps. It is safe for concurrent use.
type Operator struct {
	mu     sync.Mutex
	rng    *rand.Rand
	rate   float64
	armed  map[Fault]bool
	fired  map[Fault]int
	paused bool
	pool   pool
}

// New returns an operator with the faults of opts armed.
func New(opts Options) *Operator {
	rate := opts.Rate
	if rate <= 0 || rate > 1 {
		rate = 0.3
	}
	op := &Operator{rng: rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)), rate: rate,
		armed: map[Fault]bool{}, fired: map[Fault]int{}, pool: newPool()}
	for _, f := range opts.Faults {
		op.armed[f] = true
	}
	return op
}

// Set replaces the operator's seed, faults and rate with opts'; what it
// remembers of served envelopes stays, as material for forgeries.
func (op *Operator) Set(opts Options) {
	fresh := New(opts)
	op.mu.Lock()
	defer op.mu.Unlock()
	op.rng, op.rate, op.armed, op.fired = fresh.rng, fresh.rate, fresh.armed, fresh.fired
}

// Mix returns n distinct faults drawn from [All] by seed, for random
// mixes.
func Mix(seed uint64, n int) []Fault {
	r := rand.New(rand.NewPCG(seed, seed+1))
	fs := append([]Fault(nil), All...)
	r.Shuffle(len(fs), func(i, j int) { fs[i], fs[j] = fs[j], fs[i] })
	return fs[:min(max(n, 0), len(fs))]
}

// Pause stops every fault until Resume; the operator still remembers what
// it serves.
func (op *Operator) Pause() { op.mu.Lock(); op.paused = true; op.mu.Unlock() }

// Resume restarts the armed faults after Pause.
func (op *Operator) Resume() { op.mu.Lock(); op.paused = false; op.mu.Unlock() }

// Fired returns how many times f fired.
func (op *Operator) Fired(f Fault) int {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.fired[f]
}

// fire reports whether f fires now, and counts it.
func (op *Operator) fire(f Fault) bool {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.fireLocked(f)
}

func (op *Operator) fireLocked(f Fault) bool {
	if op.paused || !op.armed[f] || op.rng.Float64() >= op.rate {
		return false
	}
	op.fired[f]++
	return true
}

// intN returns a number in [0, n), n > 0.
func (op *Operator) intN(n int) int {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.rng.IntN(n)
}

// junk returns n random bytes.
func (op *Operator) junk(n int) []byte {
	op.mu.Lock()
	defer op.mu.Unlock()
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(op.rng.Uint32())
	}
	return b
}

var _ ports.Transport = (*Transport)(nil)

// Transport is one installation's [ports.Transport] behind the operator.
type Transport struct {
	op    *Operator
	inner ports.Transport
}

// Wrap returns inner behind the operator.
func (op *Operator) Wrap(inner ports.Transport) *Transport { return &Transport{op: op, inner: inner} }

// Inner returns the wrapped transport.
func (t *Transport) Inner() ports.Transport { return t.inner }

func unavailable(what string) error {
	return fmt.Errorf("%s: %w: %w", what, ports.ErrUnavailable, ErrInjected)
}

// Publish loses the request under [Drop], and stores it but reports it
// unavailable under [PublishUnknown].
func (t *Transport) Publish(ctx context.Context, envs []*backendpb.ClientEnvelope) ([]uint64, error) {
	if t.op.fire(Drop) {
		return nil, unavailable("publish lost before it was stored")
	}
	seqs, err := t.inner.Publish(ctx, envs)
	if err == nil && t.op.fire(PublishUnknown) {
		return nil, unavailable("publish stored, answer lost")
	}
	return seqs, err
}

// Query serves the honest answer through the armed faults.
func (t *Transport) Query(ctx context.Context, topic []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error) {
	if t.op.fire(Drop) {
		return nil, unavailable("query answer lost")
	}
	page, err := t.inner.Query(ctx, topic, after, limit)
	if err != nil {
		return nil, err
	}
	t.op.pool.remember(topic, page)
	return t.op.distort(topic, after, page), nil
}

// QueryNewest lies under [NewestUp] and [NewestDown].
func (t *Transport) QueryNewest(ctx context.Context, topic []byte) (*backendpb.OriginatorEnvelope, error) {
	env, err := t.inner.QueryNewest(ctx, topic)
	if err != nil {
		return nil, err
	}
	t.op.pool.remember(topic, []*backendpb.OriginatorEnvelope{env})
	switch {
	case t.op.fire(NewestUp):
		c := clone(env)
		c.SequenceId += 1 + uint64(t.op.intN(1<<20))
		return c, nil
	case t.op.fire(NewestDown):
		older, err := t.inner.Query(ctx, topic, 0, 1)
		if err != nil || len(older) == 0 || older[0].GetSequenceId() >= env.GetSequenceId() {
			return nil, fmt.Errorf("newest of topic: %w (%w)", ports.ErrNotFound, ErrInjected)
		}
		return older[0], nil
	}
	return env, nil
}

// HighestSequenceID lies under [NewestUp] and [NewestDown].
func (t *Transport) HighestSequenceID(ctx context.Context, topic []byte) (uint64, error) {
	h, err := t.inner.HighestSequenceID(ctx, topic)
	if err != nil {
		return 0, err
	}
	switch {
	case t.op.fire(NewestUp):
		return h + 1 + uint64(t.op.intN(1<<20)), nil
	case t.op.fire(NewestDown) && h > 0:
		return uint64(t.op.intN(int(min(h, 1<<30)))), nil
	}
	return h, nil
}

// Subscribe wraps the stream: under [Drop] it loses envelopes, under
// [SubscriptionLoss] it ends after a few.
func (t *Transport) Subscribe(ctx context.Context, cursors []ports.TopicCursor) (ports.Subscription, error) {
	if t.op.fire(Drop) {
		return nil, unavailable("subscribe lost")
	}
	sub, err := t.inner.Subscribe(ctx, cursors)
	if err != nil {
		return nil, err
	}
	s := &subscription{op: t.op, inner: sub, left: -1}
	if t.op.fire(SubscriptionLoss) {
		s.left = t.op.intN(4)
	}
	return s, nil
}

type subscription struct {
	op    *Operator
	inner ports.Subscription
	mu    sync.Mutex
	left  int // envelopes before the stream breaks; -1: never
}

func (s *subscription) Next(ctx context.Context) (*backendpb.OriginatorEnvelope, error) {
	for {
		s.mu.Lock()
		if s.left == 0 {
			s.mu.Unlock()
			return nil, unavailable("subscription went away")
		}
		if s.left > 0 {
			s.left--
		}
		s.mu.Unlock()
		env, err := s.inner.Next(ctx)
		if err != nil || !s.op.fire(Drop) {
			return env, err
		}
	}
}

func (s *subscription) Close() error { return s.inner.Close() }
