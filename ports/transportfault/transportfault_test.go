package transportfault

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// honest is a minimal honest service for the decorator's unit tests: one
// id counter shared by all topics, prefix reads.
type honest struct {
	next   uint64
	topics map[string][]*backendpb.OriginatorEnvelope
}

func newHonest() *honest { return &honest{topics: map[string][]*backendpb.OriginatorEnvelope{}} }

func (h *honest) Publish(_ context.Context, envs []*backendpb.ClientEnvelope) ([]uint64, error) {
	var ids []uint64
	for _, e := range envs {
		h.next += 2 // every topic's ids have gaps, as under a shared counter
		t := string(e.GetTargetTopic())
		h.topics[t] = append(h.topics[t], &backendpb.OriginatorEnvelope{SequenceId: h.next, Envelope: e})
		ids = append(ids, h.next)
	}
	return ids, nil
}

func (h *honest) Query(_ context.Context, topic []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error) {
	var out []*backendpb.OriginatorEnvelope
	for _, e := range h.topics[string(topic)] {
		if e.GetSequenceId() > after && (limit <= 0 || len(out) < limit) {
			out = append(out, e)
		}
	}
	return out, nil
}

func (h *honest) QueryNewest(_ context.Context, topic []byte) (*backendpb.OriginatorEnvelope, error) {
	es := h.topics[string(topic)]
	if len(es) == 0 {
		return nil, ports.ErrNotFound
	}
	return es[len(es)-1], nil
}

func (h *honest) HighestSequenceID(ctx context.Context, topic []byte) (uint64, error) {
	e, err := h.QueryNewest(ctx, topic)
	if err != nil {
		return 0, nil
	}
	return e.GetSequenceId(), nil
}

func (h *honest) Subscribe(context.Context, []ports.TopicCursor) (ports.Subscription, error) {
	return nil, ports.ErrUnsupported
}

func fill(t *testing.T, tr ports.Transport, kinds ...ports.TopicKind) {
	t.Helper()
	for _, k := range kinds {
		for g := 0; g < 2; g++ {
			topic := append([]byte{byte(k)}, make([]byte, 32)...)
			topic[1] = byte(g)
			for i := 0; i < 10; i++ {
				env := &backendpb.ClientEnvelope{TargetTopic: topic,
					Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: []byte(fmt.Sprintf("%d-%d", g, i))}}
				if _, err := tr.Publish(context.Background(), []*backendpb.ClientEnvelope{env}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func topicOf(k ports.TopicKind, g byte) []byte {
	topic := append([]byte{byte(k)}, make([]byte, 32)...)
	topic[1] = g
	return topic
}

// answers runs a fixed sequence of calls and returns what they answered.
func answers(t *testing.T, f Fault, seed uint64) []string {
	t.Helper()
	h := newHonest()
	fill(t, h, ports.TopicGroupMessages, ports.TopicCommitLog, ports.TopicWelcomes)
	tr := New(Options{Seed: seed, Faults: []Fault{f}, Rate: 0.5}).Wrap(h)
	var out []string
	ctx := context.Background()
	for i := 0; i < 30; i++ {
		for _, k := range []ports.TopicKind{ports.TopicGroupMessages, ports.TopicCommitLog, ports.TopicWelcomes} {
			page, err := tr.Query(ctx, topicOf(k, byte(i%2)), uint64(i), 6)
			var ids []uint64
			for _, e := range page {
				b, _ := proto.Marshal(e)
				ids = append(ids, e.GetSequenceId(), uint64(len(b)))
			}
			hi, _ := tr.HighestSequenceID(ctx, topicOf(k, 0))
			out = append(out, fmt.Sprint(ids, err, hi))
		}
	}
	return out
}

// Every fault fires, and the same seed meets the same faults: the
// decorator is deterministic for calls in the same order.
func TestFaultsDeterministicAndFiring(t *testing.T) {
	for _, f := range All {
		a, b := answers(t, f, 7), answers(t, f, 7)
		if !slices.Equal(a, b) {
			t.Errorf("%v: two runs of seed 7 differ", f)
		}
	}
	h := newHonest()
	fill(t, h, ports.TopicGroupMessages, ports.TopicCommitLog, ports.TopicWelcomes)
	op := New(Options{Seed: 3, Faults: All, Rate: 0.5})
	tr := op.Wrap(h)
	ctx := context.Background()
	for i := 0; i < 200; i++ {
		for _, k := range []ports.TopicKind{ports.TopicGroupMessages, ports.TopicCommitLog, ports.TopicWelcomes} {
			_, _ = tr.Query(ctx, topicOf(k, byte(i%2)), 0, 0)
			_, _ = tr.HighestSequenceID(ctx, topicOf(k, 0))
			_, _ = tr.QueryNewest(ctx, topicOf(k, 0))
		}
		_, _ = tr.Publish(ctx, []*backendpb.ClientEnvelope{{TargetTopic: topicOf(ports.TopicGroupMessages, 9),
			Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: []byte{1}}}})
	}
	for _, f := range All {
		if f == SubscriptionLoss || f == ForgePointee {
			continue // no subscription and no pointee in this service
		}
		if op.Fired(f) == 0 {
			t.Errorf("%v never fired", f)
		}
	}
}

// The lies are the ones named: reordered and duplicated answers, forged
// envelopes only in gaps, junk at an extreme id, short prefixes, a lost
// publish that was stored; paused, the operator is honest.
func TestFaultsLieAsNamed(t *testing.T) {
	ctx := context.Background()
	topic := topicOf(ports.TopicGroupMessages, 0)
	check := func(f Fault, ok func(honest, got []*backendpb.OriginatorEnvelope) bool) {
		t.Helper()
		h := newHonest()
		fill(t, h, ports.TopicGroupMessages)
		op := New(Options{Seed: 1, Faults: []Fault{f}, Rate: 1})
		tr := op.Wrap(h)
		want, _ := h.Query(ctx, topic, 0, 0)
		got, err := tr.Query(ctx, topic, 0, 0)
		if err != nil || !ok(want, got) {
			t.Errorf("%v: answer %v (%v) is not the named lie of %v", f, ids(got), err, ids(want))
		}
		op.Pause()
		if got, _ := tr.Query(ctx, topic, 0, 0); !slices.Equal(ids(got), ids(want)) {
			t.Errorf("%v paused: %v, want the honest %v", f, ids(got), ids(want))
		}
	}
	check(Reorder, func(w, g []*backendpb.OriginatorEnvelope) bool {
		s := slices.Clone(ids(g))
		slices.Sort(s)
		return !slices.Equal(ids(g), ids(w)) && slices.Equal(s, ids(w))
	})
	check(Duplicate, func(w, g []*backendpb.OriginatorEnvelope) bool {
		return len(g) == len(w)+1 && slices.Equal(slices.Compact(ids(g)), ids(w))
	})
	check(ShortPage, func(w, g []*backendpb.OriginatorEnvelope) bool {
		return len(g) < len(w) && slices.Equal(ids(g), ids(w)[:len(g)])
	})
	check(ForgeMessage, func(w, g []*backendpb.OriginatorEnvelope) bool {
		return len(g) == len(w)+1 && slices.IsSorted(ids(g)) && len(slices.Compact(ids(g))) == len(g)
	})
	check(JunkExtreme, func(w, g []*backendpb.OriginatorEnvelope) bool {
		return len(g) == len(w)+1 && slices.Contains(Extreme, g[len(g)-1].GetSequenceId())
	})
	h := newHonest()
	tr := New(Options{Seed: 1, Faults: []Fault{PublishUnknown}, Rate: 1}).Wrap(h)
	_, err := tr.Publish(ctx, []*backendpb.ClientEnvelope{{TargetTopic: topic}})
	if !errors.Is(err, ports.ErrUnavailable) || !errors.Is(err, ErrInjected) || len(h.topics[string(topic)]) != 1 {
		t.Errorf("publish-unknown: %v with %d stored; want unavailable and stored", err, len(h.topics[string(topic)]))
	}
}

func ids(es []*backendpb.OriginatorEnvelope) []uint64 {
	var out []uint64
	for _, e := range es {
		out = append(out, e.GetSequenceId())
	}
	return out
}
