package join_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/join"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/apipb"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// servedAt is a joiner whose welcome topic is served with every envelope
// at the sequence id *seq: a delivery service that chooses the ids.
func servedAt(w *world, seq *uint64) *inst {
	return w.newInst("joiner", instOptions{Transport: func(in *inst, tr ports.Transport) ports.Transport {
		return &rewriting{Transport: tr, topic: join.WelcomeTopic(in.key()), rewrite: func(e *backendpb.OriginatorEnvelope) {
			e.SequenceId = *seq
		}}
	}})
}

// JOIN-037 at its boundary: a message_cursor equal to the Welcome's own
// sequence id is rejected; one below it by one is not.
func TestJOIN037_AnchorBoundary(t *testing.T) {
	for _, tc := range []struct {
		above uint64
		want  string
	}{{0, "rejected JOIN-037"}, {1, "joined"}} {
		t.Run(fmt.Sprintf("welcome at anchor+%d", tc.above), func(t *testing.T) {
			w := newWorld(t, "sqlite")
			a := w.newInst("adder", instOptions{})
			var seq uint64
			j := servedAt(w, &seq)
			g := a.newGroup(groupSpec{})
			ad := g.add(addSpec{}, j)
			seq = ad.anchor + tc.above
			g.send(ad)
			j.process()
			j.want(seq, tc.want)
		})
	}
}

// JOIN-050 at its boundary: an identity reference equal to the Welcome's
// own sequence id is rejected; one below it by one is not.
func TestJOIN050_IdentityReferenceBoundary(t *testing.T) {
	for _, tc := range []struct {
		above uint64
		want  string
	}{{0, "rejected JOIN-050"}, {1, "joined"}} {
		t.Run(fmt.Sprintf("welcome at reference+%d", tc.above), func(t *testing.T) {
			w := newWorld(t, "sqlite")
			a := w.newInst("adder", instOptions{})
			var seq uint64
			j := servedAt(w, &seq)
			g := a.newGroup(groupSpec{})
			ad := g.add(addSpec{}, j)
			ref := max(a.association(a.inbox()).SequenceID, a.association(j.inbox()).SequenceID)
			seq = ref + tc.above
			g.sendAt(ad, 1) // an anchor below every reference, so JOIN-037 passes
			j.process()
			j.want(seq, tc.want)
		})
	}
}

// JOIN-084: a Welcome addressed to a key package whose init or leaf
// encryption private key is gone is held under the missing-key policy,
// not rejected, and joins once the key is back.
func TestJOIN084_MissingInitOrEncryptionKeyIsHeld(t *testing.T) {
	for _, which := range []string{"init", "encryption"} {
		t.Run(which, func(t *testing.T) {
			w := newWorld(t, "sqlite")
			a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{})
			recs := j.records()
			kp := recs[len(recs)-1]
			set := func(r *ports.KeyPackageRecord, k []byte) {
				if which == "init" {
					r.InitPrivateKey = k
				} else {
					r.EncryptionPrivateKey = k
				}
			}
			j.tx(func(ctx context.Context, tx ports.Tx) error {
				return tx.KeyPackages().Update(ctx, kp.Ref, func(r *ports.KeyPackageRecord) error { set(r, nil); return nil })
			})
			_, seq := a.newGroup(groupSpec{}).join(j, addSpec{})
			j.process()
			j.want(seq, "held JOIN-084")
			j.tx(func(ctx context.Context, tx ports.Tx) error {
				return tx.KeyPackages().Update(ctx, kp.Ref, func(r *ports.KeyPackageRecord) error {
					if which == "init" {
						set(r, kp.InitPrivateKey)
					} else {
						set(r, kp.EncryptionPrivateKey)
					}
					return nil
				})
			})
			j.retry()
			j.want(seq, "joined")
		})
	}
}

// JOIN-092's condition: only a Welcome whose message_cursor is above the
// stored cursor waits for the removal. One at the stored cursor of a
// group that is still active is decided at once under JOIN-042, though
// its epoch is later.
func TestJOIN092_AnchorAtStoredCursorIsNotHeld(t *testing.T) {
	for _, above := range []uint64{0, 1} {
		t.Run(fmt.Sprintf("anchor cursor+%d", above), func(t *testing.T) {
			w := newWorld(t, "sqlite")
			a := w.newInst("adder", instOptions{})
			j := w.newInst("joiner", instOptions{NoCatchUp: true})
			g := a.newGroup(groupSpec{})
			_, first := g.join(j, addSpec{})
			j.process()
			j.want(first, "joined")
			gr, _ := j.group(g.id)
			ad := g.add(addSpec{remove: []uint32{g.leafOf(j)}}, j) // a readd, not yet read by j
			seq := g.sendAt(ad, gr.Cursor+above)
			j.process()
			if above == 0 {
				j.want(seq, "rejected JOIN-042")
			} else {
				j.want(seq, "held JOIN-092")
			}
		})
	}
}

// JOIN-092's deadline condition: 3 days after the Welcome, a topic that
// ends below message_cursor rejects the Welcome only once the client has
// processed the topic through that end; before that the Welcome stays
// held.
func TestJOIN092_DeadlineWaitsForProcessingThroughTheEnd(t *testing.T) {
	w := newWorld(t, "sqlite")
	a := w.newInst("adder", instOptions{})
	j := w.newInst("joiner", instOptions{NoCatchUp: true})
	g := a.newGroup(groupSpec{})
	_, first := g.join(j, addSpec{})
	j.process()
	j.want(first, "joined")
	end := g.commit(ports.CommitOptions{ForcePath: true}) // the topic's end; j has not read it
	ad := g.add(addSpec{remove: []uint32{g.leafOf(j)}, local: true}, j)
	a.fill(5)
	seq := g.sendAt(ad, end+3) // an anchor the topic never reaches
	j.process()
	j.want(seq, "held JOIN-092")
	w.clock.Advance(73 * time.Hour)
	j.retry()
	j.want(seq, "held JOIN-092") // the topic was not processed through its end
	if err := j.catchUp(w.ctx, g.id); err != nil {
		t.Fatal(err)
	}
	j.retry()
	j.want(seq, "rejected JOIN-092")
}

// COMP-165, JOIN-037: a pointee the delivery service serves under a
// sequence id above its pointer's does not loosen the bound: the lower id
// (the pointer's) is the Welcome's own, so an anchor at the pointer's id
// is rejected.
func TestJOIN037_PointeeIdAbovePointerDoesNotLoosenTheBound(t *testing.T) {
	w := newWorld(t, "sqlite")
	a := w.newInst("adder", instOptions{})
	k := newPointeeKeys()
	var lie uint64
	j := w.newInst("joiner", instOptions{Transport: func(_ *inst, tr ports.Transport) ports.Transport {
		return &rewriting{Transport: tr, topic: join.WelcomeTopic(k.dest), rewrite: func(e *backendpb.OriginatorEnvelope) { e.SequenceId = lie }}
	}})
	ad := a.newGroup(groupSpec{}).add(addSpec{}, j)
	id := make([]byte, 32)
	rand.Read(id)
	last := a.publish(welcomeEnv(id, &apipb.WelcomeMessage{Version: &apipb.WelcomeMessage_V1_{V1: &apipb.WelcomeMessage_V1{InstallationKey: id, Data: []byte{1}}}}))[0]
	// The shared counter (COMP-041): the pointee gets last+1, the pointer last+2.
	pointer := last + 2
	lie = pointer + 1000
	a.publish(a.pointee(k, ports.WrapperSymmetricKey, ad.welcome, meta(pointer)))
	if seq := a.publish(a.pointerFor(ad.recipients[0], k.pointer()))[0]; seq != pointer {
		t.Fatalf("the pointer has sequence id %d, want %d", seq, pointer)
	}
	j.process()
	j.want(pointer, "rejected JOIN-037")
}
