package transporttest

import (
	"crypto/ed25519"
	"errors"
	"math"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

// COMP-143 (API-201): a cursor above 2^63-1, the highest id a service can
// assign, is refused with ErrInvalidArgument by Query and Subscribe; it
// must never wrap around and serve the topic from its start again.
func testCursorAboveInt64(t *testing.T, h Harness) {
	ctx, tr := testCtx(t), h.NewTransport(t)
	topic := RandomGroupTopic()
	publish(t, ctx, tr, GroupMessage(topic, []byte("old")))
	for _, after := range []uint64{math.MaxUint64, math.MaxInt64 + 1} {
		page, err := tr.Query(ctx, topic, after, 0)
		if !errors.Is(err, ports.ErrInvalidArgument) {
			t.Errorf("Query(after %d) = %d envelopes, %v; want ErrInvalidArgument", after, len(page), err)
		}
		sub, err := tr.Subscribe(ctx, []ports.TopicCursor{{Topic: topic, After: after}})
		if !errors.Is(err, ports.ErrInvalidArgument) {
			if sub != nil {
				sub.Close()
			}
			t.Errorf("Subscribe(after %d) = %v, want ErrInvalidArgument", after, err)
		}
	}
	if page, err := tr.Query(ctx, topic, math.MaxInt64, 0); err != nil || len(page) != 0 {
		t.Errorf("Query(after 2^63-1) = %d envelopes, %v; want none", len(page), err)
	}
}

// COMP-144: a sealed commit-log entry published again on its topic (a
// replay, or a retry whose first attempt was stored) is stored once: the
// second publish returns the stored entry's id, and a read finds it once.
// Another entry in the same batch is stored as usual.
func testCommitLogStoredOnce(t *testing.T, h Harness) {
	ctx, tr := testCtx(t), h.NewTransport(t)
	_, priv, _ := ed25519.GenerateKey(nil)
	entry := SealedEntry(priv, random(12), []byte("ciphertext"))
	first := publish(t, ctx, tr, entry)
	other := SealedEntry(priv, random(12), []byte("another"))
	again := publish(t, ctx, tr, entry, other, entry)
	if again[0] != first[0] || again[2] != first[0] {
		t.Fatalf("replayed entry got ids %d and %d, want the stored %d", again[0], again[2], first[0])
	}
	if again[1] <= first[0] {
		t.Fatalf("a new entry got id %d, not above %d", again[1], first[0])
	}
	checkIDs(t, "commit-log topic", queryAll(t, ctx, tr, entry.GetTargetTopic()), []uint64{first[0], again[1]})
	// A group message is not an entry: identical bytes are two envelopes.
	topic := RandomGroupTopic()
	msg := GroupMessage(topic, []byte("same"))
	ids := publish(t, ctx, tr, msg, msg)
	checkIDs(t, "group topic", queryAll(t, ctx, tr, topic), ids)
}
