package transporttest

import (
	"errors"
	"slices"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

// API-244, COMP-279: a transport that implements [ports.HighestReader]
// answers, for each topic in order, what HighestSequenceID answers for
// it (0 for an empty topic, the topic's own id, not the service's), and
// refuses a call with no topic, with more than [ports.MaxHighestTopics],
// or naming a topic the caller may not read, as a whole.
func testHighestBatched(t *testing.T, h Harness) {
	ctx, tr, anon := testCtx(t), h.NewTransport(t), h.NewAnonymousTransport(t)
	hr, ok := tr.(ports.HighestReader)
	if !ok {
		t.Skip("the transport does not implement ports.HighestReader (optional)")
	}
	busy, empty, one := RandomGroupTopic(), RandomGroupTopic(), RandomGroupTopic()
	ids := publish(t, ctx, tr, GroupMessage(busy, []byte("1")), GroupMessage(one, []byte("2")), GroupMessage(busy, []byte("3")))
	publish(t, ctx, tr, GroupMessage(RandomGroupTopic(), []byte("elsewhere")))
	topics := [][]byte{busy, empty, one, busy}
	want := []uint64{ids[2], 0, ids[1], ids[2]}
	for i, topic := range topics {
		n, err := tr.HighestSequenceID(ctx, topic)
		if err != nil || n != want[i] {
			t.Fatalf("HighestSequenceID of topic %d = %d, %v; want %d", i, n, err, want[i])
		}
	}
	got, err := hr.HighestSequenceIDs(ctx, topics)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("HighestSequenceIDs = %v, %v; want %v", got, err, want)
	}
	// The most topics a service must accept, in one call.
	many := make([][]byte, ports.MaxHighestTopics)
	for i := range many {
		many[i] = RandomGroupTopic()
	}
	many[len(many)-1] = busy
	if got, err := hr.HighestSequenceIDs(ctx, many); err != nil || len(got) != len(many) || got[len(got)-1] != ids[2] || got[0] != 0 {
		t.Errorf("HighestSequenceIDs of %d topics = %d ids (last %v), %v; want the last %d", len(many), len(got), got[len(got)-1:], err, ids[2])
	}
	if _, err := hr.HighestSequenceIDs(ctx, nil); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Errorf("HighestSequenceIDs of no topic = %v, want ErrInvalidArgument", err)
	}
	if _, err := hr.HighestSequenceIDs(ctx, append(many, busy)); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Errorf("HighestSequenceIDs of %d topics = %v, want ErrInvalidArgument", len(many)+1, err)
	}
	if _, err := hr.HighestSequenceIDs(ctx, [][]byte{busy, {0x7f, 1}}); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Errorf("HighestSequenceIDs naming a malformed topic = %v, want ErrInvalidArgument", err)
	}
	if ahr, ok := anon.(ports.HighestReader); ok {
		if _, err := ahr.HighestSequenceIDs(ctx, [][]byte{busy}); !errors.Is(err, ports.ErrUnauthenticated) {
			t.Errorf("anonymous HighestSequenceIDs of a group topic = %v, want ErrUnauthenticated", err)
		}
	}
}
