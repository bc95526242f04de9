package identity_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/adapters/memtransport"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// inboxModel is an inbox the test publishes updates of, and the
// association state it expects at each update's sequence id, computed by
// the test itself (COMP-071: adds append, revokes remove).
type inboxModel struct {
	recovery ed25519.PrivateKey
	id       string
	keys     [][]byte
	at       map[uint64][][]byte
}

func newInboxModel(t *testing.T) *inboxModel {
	rk := mustKey(t)
	return &inboxModel{recovery: rk, id: identity.InboxID(rk.Public().(ed25519.PublicKey)), at: map[uint64][][]byte{}}
}

func (m *inboxModel) add(t *testing.T, tr ports.Transport) uint64 {
	k := mustKey(t)
	u, err := identity.NewAdd(m.recovery, k, 1)
	if err != nil {
		t.Fatal(err)
	}
	seq := publish(t, tr, u)
	m.keys = append(append([][]byte(nil), m.keys...), []byte(k.Public().(ed25519.PublicKey)))
	m.at[seq] = m.keys
	return seq
}

func (m *inboxModel) revokeFirst(t *testing.T, tr ports.Transport) uint64 {
	u, err := identity.NewRevoke(m.recovery, m.keys[0], 2)
	if err != nil {
		t.Fatal(err)
	}
	seq := publish(t, tr, u)
	m.keys = append([][]byte(nil), m.keys[1:]...)
	m.at[seq] = m.keys
	return seq
}

// waitArmed is waitWaiting for a call whose answer arrives on ch: an
// answer before the resolver waits on the clock fails the test with it.
func waitArmed[T any](t *testing.T, w *world, ch chan T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for w.clock.Waiters() == 0 {
		select {
		case v := <-ch:
			t.Fatalf("answered without waiting for the retry window: %+v", v)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the resolver never waited on the clock")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// JOIN-051, JOIN-059: AssociationStates answers each request of a batch
// exactly as the rules ask, with one retry window for the call: a state
// held or fetched at its exact sequence id is the fold the test computes
// itself (two requests of one inbox, a revocation); an update that
// arrives inside the window is found; a sequence id below a later update
// of the inbox with no update of its own is ErrNotFound; one that never
// comes is ErrNotFound only when the window has ended; malformed requests
// are ErrNotFound. Every answer equals the single AssociationState's.
func TestJOIN051_JOIN059_Batch(t *testing.T) {
	w := newWorld(t, "sqlite")
	tr := memtransport.New(w.svc, nil)
	a, b, c, d := newInboxModel(t), newInboxModel(t), newInboxModel(t), newInboxModel(t)
	a1, a2 := a.add(t, tr), a.add(t, tr)
	b.add(t, tr)
	b2 := b.revokeFirst(t, tr)
	c.add(t, tr)
	d.add(t, tr)
	next := d.add(t, tr) + 1 // the shared counter's next id: C's late update
	r := w.resolver(t, tr, 5*time.Second)
	reqs := []ports.IdentityRequest{
		{InboxID: a.id, SequenceID: a2},
		{InboxID: b.id, SequenceID: b2},
		{InboxID: c.id, SequenceID: next},
		{InboxID: d.id, SequenceID: a1}, // D holds later updates, none at a1
		{InboxID: a.id, SequenceID: a1},
		{InboxID: b.id, SequenceID: next + 100}, // never comes
		{InboxID: "not-an-inbox", SequenceID: 1},
		{InboxID: a.id, SequenceID: 0},
	}
	type answer struct {
		res []ports.IdentityResult
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		res, err := r.AssociationStates(context.Background(), reqs)
		ch <- answer{res, err}
	}()
	waitArmed(t, w, ch)
	if got := c.add(t, tr); got != next {
		t.Fatalf("test setup: C's late update got %d, want %d", got, next)
	}
	for i := 0; i < 4; i++ {
		w.clock.Advance(time.Second)
		waitArmed(t, w, ch)
	}
	select {
	case got := <-ch:
		t.Fatalf("JOIN-059: the batch answered (%v) before the retry window of its last request ended", got.err)
	default:
	}
	w.clock.Advance(time.Second)
	got := <-ch
	if got.err != nil || len(got.res) != len(reqs) {
		t.Fatalf("AssociationStates = %d results, %v", len(got.res), got.err)
	}
	wantKeys := map[int][][]byte{0: a.at[a2], 1: b.at[b2], 2: c.at[next], 4: a.at[a1]}
	for i, res := range got.res {
		if want, ok := wantKeys[i]; ok {
			if res.Err != nil || res.State.InboxID != reqs[i].InboxID || res.State.SequenceID != reqs[i].SequenceID || !same(res.State.InstallationKeys, want) {
				t.Errorf("JOIN-051: request %d = %+v, %v; want keys %x", i, res.State, res.Err, want)
			}
		} else if !errors.Is(res.Err, ports.ErrNotFound) {
			t.Errorf("JOIN-059: request %d = %+v, %v; want ErrNotFound", i, res.State, res.Err)
		}
		// Each answer is what one AssociationState call gives, from what is
		// now held (request 5 waits a whole window: let it run out).
		ch := make(chan answer, 1)
		go func() {
			st, err := r.AssociationState(context.Background(), reqs[i].InboxID, reqs[i].SequenceID)
			ch <- answer{[]ports.IdentityResult{{State: st, Err: err}}, nil}
		}()
		if i == 5 {
			for k := 0; k < 5; k++ {
				waitWaiting(t, w)
				w.clock.Advance(time.Second)
			}
		}
		one := (<-ch).res[0]
		if (one.Err == nil) != (res.Err == nil) || !same(one.State.InstallationKeys, res.State.InstallationKeys) || one.State.SequenceID != res.State.SequenceID {
			t.Errorf("request %d: batch %+v, %v; single %+v, %v", i, res.State, res.Err, one.State, one.Err)
		}
	}
}

// stalling serves every topic but fails reads of one inbox's topic after
// its first page, as a connection that drops mid-fetch does.
type stalling struct {
	ports.Transport
	topic []byte
	calls atomic.Int32
}

func (s *stalling) Query(ctx context.Context, topic []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error) {
	if string(topic) == string(s.topic) && s.calls.Add(1) > 1 {
		return nil, fmt.Errorf("%w: connection reset", ports.ErrUnavailable)
	}
	return s.Transport.Query(ctx, topic, after, limit)
}

// JOIN-051: a batch never answers from partial state. When an inbox's
// fetch stops after a first page that does not reach the requested
// sequence id, that request ends in ErrUnavailable — not in the fold of
// the page it got, nor in ErrNotFound — while the other requests of the
// batch are answered.
func TestJOIN051_BatchNeverAnswersFromPartialState(t *testing.T) {
	w := newWorld(t, "sqlite")
	mem := memtransport.New(w.svc, nil)
	a, b := newInboxModel(t), newInboxModel(t)
	a.add(t, mem)
	a2 := a.add(t, mem)
	b1 := b.add(t, mem)
	topic, _ := identity.Topic(a.id)
	tr := &stalling{Transport: mem, topic: topic}
	r, err := identity.NewResolver(identity.ResolverOptions{Store: w.store, Transport: tr, Clock: w.clock,
		RetryWindow: 2 * time.Second, RetryInterval: time.Second, PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan []ports.IdentityResult, 1)
	go func() {
		res, err := r.AssociationStates(context.Background(), []ports.IdentityRequest{{InboxID: a.id, SequenceID: a2}, {InboxID: b.id, SequenceID: b1}})
		if err != nil {
			t.Error(err)
		}
		ch <- res
	}()
	for i := 0; i < 2; i++ {
		waitArmed(t, w, ch)
		w.clock.Advance(time.Second)
	}
	res := <-ch
	if len(res) != 2 || !errors.Is(res[0].Err, ports.ErrUnavailable) || len(res[0].State.InstallationKeys) != 0 {
		t.Fatalf("JOIN-051: the inbox fetched in part = %+v, want ErrUnavailable and no state", res)
	}
	if res[1].Err != nil || !same(res[1].State.InstallationKeys, b.at[b1]) {
		t.Fatalf("the other inbox = %+v, %v; want %x", res[1].State, res[1].Err, b.at[b1])
	}
}

// counting counts the store's transactions.
type counting struct {
	ports.Store
	n atomic.Int32
}

func (c *counting) Tx(ctx context.Context, fn func(ports.Tx) error) error {
	c.n.Add(1)
	return c.Store.Tx(ctx, fn)
}

// gate makes the first n queries wait until all n are in flight at once,
// and records the most ever in flight.
type gate struct {
	ports.Transport
	n                 int32
	started, inflight atomic.Int32
	most              atomic.Int32
	all               chan struct{}
	once              sync.Once
	t                 *testing.T
}

func (g *gate) Query(ctx context.Context, topic []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error) {
	in := g.inflight.Add(1)
	defer g.inflight.Add(-1)
	for m := g.most.Load(); in > m && !g.most.CompareAndSwap(m, in); m = g.most.Load() {
	}
	if k := g.started.Add(1); k <= g.n {
		if k == g.n {
			g.once.Do(func() { close(g.all) })
		}
		select {
		case <-g.all:
		case <-time.After(30 * time.Second):
			g.t.Errorf("only %d of the first %d fetches ever ran at once", g.inflight.Load(), g.n)
		}
	}
	return g.Transport.Query(ctx, topic, after, limit)
}

// COMP-130: a cold batch of many inboxes fetches Concurrency inboxes at
// once, never more, and touches the store in two transactions whatever
// its size: one that reads what is held and one that stores what was
// fetched. Its answers are the test's own folds.
func TestCOMP130_BatchFetchesConcurrentlyAndStoresOnce(t *testing.T) {
	w := newWorld(t, "sqlite")
	mem := memtransport.New(w.svc, nil)
	const inboxes, workers = 24, 4
	var models []*inboxModel
	var reqs []ports.IdentityRequest
	for i := 0; i < inboxes; i++ {
		m := newInboxModel(t)
		m.add(t, mem)
		seq := m.add(t, mem)
		models = append(models, m)
		reqs = append(reqs, ports.IdentityRequest{InboxID: m.id, SequenceID: seq})
	}
	g := &gate{Transport: mem, n: workers, all: make(chan struct{}), t: t}
	store := &counting{Store: w.store}
	r, err := identity.NewResolver(identity.ResolverOptions{Store: store, Transport: g, Clock: w.clock, Concurrency: workers})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.AssociationStates(testCtx(t), reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range reqs {
		if res[i].Err != nil || !same(res[i].State.InstallationKeys, models[i].at[q.SequenceID]) {
			t.Fatalf("request %d = %+v, %v", i, res[i].State, res[i].Err)
		}
	}
	if m := g.most.Load(); m != workers {
		t.Errorf("at most %d fetches ran at once, want exactly Concurrency = %d", m, workers)
	}
	if n := store.n.Load(); n != 2 {
		t.Errorf("the batch used %d store transactions, want 2 (read held, store fetched)", n)
	}
	// A warm batch answers from the store alone: one transaction, no fetch.
	started := g.started.Load()
	if _, err := r.AssociationStates(testCtx(t), reqs); err != nil || store.n.Load() != 3 || g.started.Load() != started {
		t.Errorf("warm batch: %v, %d transactions in all, %d fetches", err, store.n.Load(), g.started.Load()-started)
	}
}

// tampering serves every topic but corrupts the installation signature
// of the updates at the listed sequence ids, as a hostile delivery
// service may.
type tampering struct {
	ports.Transport
	at map[uint64]bool
}

func (tp *tampering) Query(ctx context.Context, topic []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error) {
	envs, err := tp.Transport.Query(ctx, topic, after, limit)
	for i, env := range envs {
		if tp.at[env.GetSequenceId()] {
			env = proto.Clone(env).(*backendpb.OriginatorEnvelope)
			env.GetEnvelope().GetIdentityUpdate().GetAddInstallation().InstallationSignature[3] ^= 1
			envs[i] = env
		}
	}
	return envs, err
}

// COMP-249, COMP-580: in a fetch of enough inboxes for the updates to be
// verified in one batch, an update whose signature a hostile delivery
// service corrupted is junk: it is neither stored nor folded, while the
// valid updates around it are. Inbox X's corrupted update comes after
// the one requested, inbox Y's before it (so Y's state must not hold its
// key).
func TestCOMP580_BatchFetchReadsPastCorruptedUpdates(t *testing.T) {
	w := newWorld(t, "sqlite")
	mem := memtransport.New(w.svc, nil)
	var reqs []ports.IdentityRequest
	var want [][][]byte
	for i := 0; i < 130; i++ { // 132 inboxes, 264 signatures or more: one batch
		m := newInboxModel(t)
		seq := m.add(t, mem)
		reqs, want = append(reqs, ports.IdentityRequest{InboxID: m.id, SequenceID: seq}), append(want, m.at[seq])
	}
	x, y := newInboxModel(t), newInboxModel(t)
	x1 := x.add(t, mem)
	x2 := x.add(t, mem)
	y1 := y.add(t, mem)
	y2 := y.add(t, mem)
	reqs = append(reqs, ports.IdentityRequest{InboxID: x.id, SequenceID: x1}, ports.IdentityRequest{InboxID: y.id, SequenceID: y2})
	want = append(want, x.at[x1], y.keys[1:]) // Y's first add is junk: only its second key
	tr := &tampering{Transport: mem, at: map[uint64]bool{x2: true, y1: true}}
	r, err := identity.NewResolver(identity.ResolverOptions{Store: w.store, Transport: tr, Clock: w.clock})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.AssociationStates(testCtx(t), reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range reqs {
		if res[i].Err != nil || !same(res[i].State.InstallationKeys, want[i]) {
			t.Fatalf("request %d = %x, %v; want %x", i, res[i].State.InstallationKeys, res[i].Err, want[i])
		}
	}
	err = w.store.Tx(testCtx(t), func(tx ports.Tx) error {
		for _, c := range []struct {
			inbox string
			want  uint64
		}{{x.id, x1}, {y.id, y2}} {
			recs, err := tx.IdentityCache().List(testCtx(t), c.inbox, math.MaxInt64)
			if err != nil {
				return err
			}
			if len(recs) != 1 || recs[0].SequenceID != c.want {
				t.Errorf("COMP-249: the cache of %s holds %d records (first %+v), want only the valid one at %d", c.inbox, len(recs), recs, c.want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
