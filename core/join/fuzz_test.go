package join_test

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// fuzzOutcome stores raw as a held Welcome, retries it, and checks that
// the receiver decided it (joined, held or rejected) without a local
// failure and without touching any group but one it joined.
func fuzzOutcome(t *testing.T, j *inst, seq uint64, raw []byte) {
	j.w.t = t // the harness reports through the iteration's T
	j.tx(func(ctx context.Context, tx ports.Tx) error {
		_, err := tx.HeldWelcomes().Put(ctx, ports.HeldWelcome{SequenceID: seq, Envelope: raw, FirstSeenAt: t0, ServerTimestamp: t0})
		return err
	})
	before := j.groups()
	if err := j.rcv.RetryHeld(j.w.ctx); err != nil {
		t.Fatalf("a Welcome's bytes caused a local failure: %v", err)
	}
	if st := j.state(seq); st == "nothing" {
		t.Fatalf("welcome %d has no outcome", seq)
	}
	if after := j.groups(); after > before+1 {
		t.Fatalf("%d groups after one Welcome, %d before", after, before)
	}
	j.tx(func(ctx context.Context, tx ports.Tx) error { return tx.HeldWelcomes().Delete(ctx, seq) })
}

func (in *inst) groups() int {
	var n int
	in.tx(func(ctx context.Context, tx ports.Tx) error {
		gs, err := tx.Groups().List(ctx, ports.GroupFilter{})
		n = len(gs)
		return err
	})
	return n
}

// FuzzHeldEnvelope feeds arbitrary stored envelope bytes to the receiver:
// the outer decoders (OriginatorEnvelope, WelcomeMessage, its variants).
func FuzzHeldEnvelope(f *testing.F) {
	w := newWorld(f, "sqlite")
	a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{})
	g := a.newGroup(groupSpec{})
	ad := g.add(addSpec{}, j)
	env := &backendpb.OriginatorEnvelope{SequenceId: 1 << 30, Envelope: a.inline(ad.recipients[0], ports.WrapperXWingMLKEM768Draft6,
		ports.WrapperXWingMLKEM768Draft6, ad.welcome, meta(ad.anchor))}
	seed, _ := proto.Marshal(env)
	f.Add(seed)
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x02, 0x12, 0x00})
	seq := uint64(1 << 40)
	f.Fuzz(func(t *testing.T, raw []byte) {
		seq++
		fuzzOutcome(t, j, seq, raw)
	})
}

// FuzzWrappedPayload seals arbitrary plaintexts as a Welcome and its
// WelcomeMetadata to the joiner's real key: the decoders behind the
// wrapper (the MLSMessage check, WelcomeMetadata, the engine's Welcome).
func FuzzWrappedPayload(f *testing.F) {
	w := newWorld(f, "sqlite")
	a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{})
	g := a.newGroup(groupSpec{})
	ad := g.add(addSpec{}, j)
	f.Add(ad.welcome, meta(ad.anchor))
	f.Add([]byte{0, 1, 0, 3}, []byte{8, 1})
	f.Add(ad.welcome[:len(ad.welcome)/2], []byte{0xff})
	seq := uint64(1 << 40)
	f.Fuzz(func(t *testing.T, welcome, md []byte) {
		if len(welcome) == 0 {
			return
		}
		seq++
		w.t = t
		env := &backendpb.OriginatorEnvelope{SequenceId: seq, Envelope: a.inline(ad.recipients[0], ports.WrapperXWingMLKEM768Draft6,
			ports.WrapperXWingMLKEM768Draft6, welcome, md)}
		raw, _ := proto.Marshal(env)
		fuzzOutcome(t, j, seq, raw)
	})
}
