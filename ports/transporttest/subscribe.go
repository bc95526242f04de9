package transporttest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

func next(t *testing.T, ctx context.Context, s ports.Subscription) *backendpb.OriginatorEnvelope {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	e, err := s.Next(ctx)
	if err != nil {
		t.Fatalf("Subscription.Next: %v", err)
	}
	return e
}

// expectIDs reads from s until every topic of want has delivered its ids,
// and fails on any envelope that is not the next expected id of its topic
// (a gap, a duplicate, a reordering, or a topic that expects nothing).
// Topics interleave freely; each topic's order is checked.
func expectIDs(t *testing.T, ctx context.Context, s ports.Subscription, want map[string][]uint64) {
	t.Helper()
	left := 0
	queue := make(map[string][]uint64, len(want))
	for topic, list := range want {
		queue[topic] = append([]uint64(nil), list...)
		left += len(list)
	}
	for ; left > 0; left-- {
		e := next(t, ctx, s)
		topic := string(e.GetEnvelope().GetTargetTopic())
		q := queue[topic]
		if len(q) == 0 {
			t.Fatalf("subscription delivered id %d on a topic that expects nothing more (duplicate or stray envelope)", e.GetSequenceId())
		}
		if e.GetSequenceId() != q[0] {
			t.Fatalf("subscription delivered id %d where the topic's next acknowledged id is %d (gap, duplicate or disorder)", e.GetSequenceId(), q[0])
		}
		queue[topic] = q[1:]
	}
}

// A subscription delivers the backlog after its cursor, then new envelopes,
// in order per topic: exactly the acknowledged ids after each cursor.
func testSubscribeBacklog(t *testing.T, h Harness) {
	ctx, tr := testCtx(t), h.NewTransport(t)
	a, b := RandomGroupTopic(), RandomGroupTopic()
	first := publish(t, ctx, tr, GroupMessage(a, []byte("1")), GroupMessage(a, []byte("2")), GroupMessage(b, []byte("1")))
	sub, err := tr.Subscribe(ctx, []ports.TopicCursor{{Topic: a, After: first[0]}, {Topic: b}})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer sub.Close()
	expectIDs(t, ctx, sub, map[string][]uint64{string(a): {first[1]}, string(b): {first[2]}})
	more := publish(t, ctx, tr, GroupMessage(b, []byte("2")), GroupMessage(a, []byte("3")))
	expectIDs(t, ctx, sub, map[string][]uint64{string(b): {more[0]}, string(a): {more[1]}})
	if err := sub.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := sub.Next(ctx); !errors.Is(err, ports.ErrClosed) {
		t.Fatalf("Next after Close: %v, want ErrClosed", err)
	}
}

// A client that closes its subscription and subscribes again from the last
// delivered id misses nothing and sees nothing twice.
func testSubscribeResume(t *testing.T, h Harness) {
	ctx, tr := testCtx(t), h.NewTransport(t)
	topic := RandomGroupTopic()
	first := publish(t, ctx, tr, GroupMessage(topic, []byte("1")), GroupMessage(topic, []byte("2")))
	sub, err := tr.Subscribe(ctx, []ports.TopicCursor{{Topic: topic}})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	expectIDs(t, ctx, sub, map[string][]uint64{string(topic): {first[0]}})
	sub.Close()
	third := publish(t, ctx, tr, GroupMessage(topic, []byte("3")))
	sub, err = tr.Subscribe(ctx, []ports.TopicCursor{{Topic: topic, After: first[0]}})
	if err != nil {
		t.Fatalf("re-Subscribe: %v", err)
	}
	defer sub.Close()
	expectIDs(t, ctx, sub, map[string][]uint64{string(topic): {first[1], third[0]}})
	fourth := publish(t, ctx, tr, GroupMessage(topic, []byte("4")))
	expectIDs(t, ctx, sub, map[string][]uint64{string(topic): fourth})
}

// A subscription open while the service restarts resumes from its last
// delivered id by itself: it delivers exactly what the topic holds, with
// no gap and no duplicate.
func testSubscribeBounce(t *testing.T, h Harness) {
	if !h.Caps().Bounce {
		t.Skip("harness cannot restart its service (Caps.Bounce is false)")
	}
	ctx, tr := testCtx(t), h.NewTransport(t)
	topic := RandomGroupTopic()
	first := publish(t, ctx, tr, GroupMessage(topic, []byte("1")), GroupMessage(topic, []byte("2")))
	sub, err := tr.Subscribe(ctx, []ports.TopicCursor{{Topic: topic}})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer sub.Close()
	expectIDs(t, ctx, sub, map[string][]uint64{string(topic): first})
	h.Bounce(t)
	// The transport reconnects by itself; retry while the service comes
	// back. An attempt that failed may still have been stored (its outcome
	// is unknown), so the check below compares with what the topic holds.
	deadline := time.Now().Add(15 * time.Second)
	var acked uint64
	for {
		ids, err := tr.Publish(ctx, []*backendpb.ClientEnvelope{GroupMessage(topic, []byte("3"))})
		if err == nil {
			acked = ids[0]
			break
		}
		if !errors.Is(err, ports.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("Publish after restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var delivered []uint64
	for len(delivered) == 0 || delivered[len(delivered)-1] < acked {
		delivered = append(delivered, next(t, ctx, sub).GetSequenceId())
	}
	held, err := tr.Query(ctx, topic, first[1], 0)
	if err != nil {
		t.Fatalf("Query: %v", err)
	}
	var want []uint64
	for _, id := range ids(held) {
		if id <= acked {
			want = append(want, id)
		}
	}
	if fmt.Sprint(delivered) != fmt.Sprint(want) || want[len(want)-1] != acked {
		t.Fatalf("after the restart the subscription delivered %v; the topic holds %v up to the acknowledged %d", delivered, want, acked)
	}
}
