package join_test

import (
	"context"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/regroup-mls/regroup/core/join"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/apipb"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// injecting is a delivery service that serves, on one topic, envelopes of
// its own at sequence ids it chooses, merged in order with the real ones,
// and counts the envelopes it serves there.
type injecting struct {
	ports.Transport
	topic []byte

	mu     sync.Mutex
	extra  []*backendpb.OriginatorEnvelope
	served int
}

func (f *injecting) inject(seq uint64, env *backendpb.ClientEnvelope) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.extra = append(f.extra, &backendpb.OriginatorEnvelope{SequenceId: seq, Envelope: env})
	slices.SortFunc(f.extra, func(a, b *backendpb.OriginatorEnvelope) int { return cmpU(a.SequenceId, b.SequenceId) })
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (f *injecting) Query(ctx context.Context, topic []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error) {
	envs, err := f.Transport.Query(ctx, topic, after, limit)
	if err != nil || string(topic) != string(f.topic) {
		return envs, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.extra {
		if e.SequenceId > after {
			envs = append(envs, e)
		}
	}
	slices.SortFunc(envs, func(a, b *backendpb.OriginatorEnvelope) int { return cmpU(a.SequenceId, b.SequenceId) })
	if len(envs) > limit {
		envs = envs[:limit]
	}
	f.served += len(envs)
	return envs, nil
}

func (f *injecting) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.served
	f.served = 0
	return n
}

// junkWelcome is an envelope on the welcome topic that names the
// installation's current wrapper key and opens under no key.
func (in *inst) junkWelcome() *backendpb.ClientEnvelope {
	recs := in.records()
	kp := recs[len(recs)-1]
	return welcomeEnv(in.key(), &apipb.WelcomeMessage{Version: &apipb.WelcomeMessage_V1_{V1: &apipb.WelcomeMessage_V1{
		InstallationKey: in.key(), Data: []byte("junk"), HpkePublicKey: kp.WrapperPublicKey,
		WrapperAlgorithm: contentspb.WelcomeWrapperAlgorithm(kp.WrapperAlgorithm)}}})
}

func newInjected(w *world) (*inst, *injecting) {
	f := &injecting{}
	j := w.newInst("joiner", instOptions{Transport: func(in *inst, tr ports.Transport) ports.Transport {
		f.Transport, f.topic = tr, join.WelcomeTopic(in.key())
		return f
	}})
	return j, f
}

func (in *inst) cursor() uint64 {
	in.w.t.Helper()
	c, err := in.rcv.Cursor(in.w.ctx)
	if err != nil {
		in.w.t.Fatal(err)
	}
	return c
}

// COMP-250: envelopes an operator places on the welcome topic at extreme
// sequence ids, which open under no key of this installation, do not move
// the durable cursor; Welcomes published afterwards, whose ids are lower,
// are still read and joined, and the cursor then moves to them.
func TestCOMP250_JunkAtExtremeIdsDoesNotMoveTheWelcomeCursor(t *testing.T) {
	w := newWorld(t, "sqlite")
	a := w.newInst("adder", instOptions{})
	j, f := newInjected(w)
	_, first := a.newGroup(groupSpec{}).join(j, addSpec{})
	for _, seq := range []uint64{math.MaxInt64 - 1, math.MaxInt64, math.MaxUint64} {
		f.inject(seq, j.junkWelcome())
	}
	// A Welcome for another installation's key, placed at a high id, is
	// held under JOIN-084 and does not move the cursor either.
	stranger := w.newInst("stranger", instOptions{})
	ad := a.newGroup(groupSpec{}).add(addSpec{}, stranger)
	other := a.inline(ad.recipients[0], ad.recipients[0].Wrapper, ad.recipients[0].Wrapper, ad.welcome, meta(ad.anchor))
	f.inject(math.MaxInt64-2, other)
	j.process()
	j.want(first, "joined")
	j.want(math.MaxInt64-1, "rejected JOIN-048")
	j.want(math.MaxInt64-2, "held JOIN-084")
	if c := j.cursor(); c != first {
		t.Fatalf("cursor %d after junk at extreme ids, want %d (the last Welcome that opened here)", c, first)
	}
	// Honest Welcomes keep arriving below the junk; a restart loses the
	// in-memory skip position and nothing else.
	_, second := a.newGroup(groupSpec{}).join(j, addSpec{})
	j.process()
	j.want(second, "joined")
	j.reopen()
	_, third := a.newGroup(groupSpec{}).join(j, addSpec{})
	j.process()
	j.want(third, "joined")
	if c := j.cursor(); c != third {
		t.Fatalf("cursor %d, want %d", c, third)
	}
	j.want(math.MaxInt64-2, "held JOIN-084")
}

// COMP-250: a Welcome held because it cannot be read yet is never lost
// when the cursor moves over it to a later Welcome that opened here: it
// stays held and joins once its keys are back.
func TestCOMP250_HeldWelcomesSurviveTheCursor(t *testing.T) {
	w := newWorld(t, "sqlite")
	a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{})
	recs := j.records()
	kp := recs[len(recs)-1]
	setWrapperKey := func(k []byte) {
		j.tx(func(ctx context.Context, tx ports.Tx) error {
			return tx.KeyPackages().Update(ctx, kp.Ref, func(r *ports.KeyPackageRecord) error { r.WrapperPrivateKey = k; return nil })
		})
	}
	setWrapperKey(nil)
	_, held := a.newGroup(groupSpec{}).join(j, addSpec{})
	j.process()
	j.want(held, "held JOIN-084")
	if c := j.cursor(); c != 0 {
		t.Fatalf("cursor %d moved over a Welcome that did not open", c)
	}
	setWrapperKey(kp.WrapperPrivateKey)
	_, later := a.newGroup(groupSpec{}).join(j, addSpec{})
	j.process()
	j.want(later, "joined")
	if c := j.cursor(); c != later {
		t.Fatalf("cursor %d, want %d", c, later)
	}
	j.want(held, "held JOIN-084")
	j.retry()
	j.want(held, "joined")
}

// COMP-250: junk at the tail of the topic is re-read at most one page a
// pass, however much of it there is, and a Welcome published after it is
// found by the probe from the durable cursor.
func TestCOMP250_TailJunkIsNotReadAgainEachPass(t *testing.T) {
	w := newWorld(t, "sqlite")
	a := w.newInst("adder", instOptions{})
	j, f := newInjected(w)
	for i := uint64(0); i < 150; i++ {
		f.inject(math.MaxInt64-1000+i, j.junkWelcome())
	}
	j.process()
	if n := f.count(); n < 150 {
		t.Fatalf("first pass served %d envelopes, want every junk envelope read once", n)
	}
	for range 3 {
		j.process()
		if n := f.count(); n > 100 {
			t.Fatalf("a later pass re-read %d envelopes of junk", n)
		}
	}
	_, seq := a.newGroup(groupSpec{}).join(j, addSpec{})
	j.process()
	j.want(seq, "joined")
	if c := j.cursor(); c != seq {
		t.Fatalf("cursor %d, want %d", c, seq)
	}
}
