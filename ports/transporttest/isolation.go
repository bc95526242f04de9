package transporttest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// background runs fn in a goroutine whose ctx ends when the test ends,
// and waits for it in t.Cleanup, so a case that fails early never leaves
// a goroutine publishing into later cases. It returns a function that
// stops fn and waits for it.
func background(t *testing.T, fn func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		fn(ctx)
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// A subscription that starts while publishes go on delivers every one of
// them: nothing published between reading the backlog and going live is
// lost, and nothing is delivered twice.
func testSubscribeBacklogToLive(t *testing.T, h Harness) {
	ctx, tr := testCtx(t), h.NewTransport(t)
	topic := RandomGroupTopic()
	var mu sync.Mutex
	var acked []uint64
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	var pubErr error
	// Three publishers keep the topic busy, so that whatever moment a
	// subscription takes to go live, envelopes arrive during it.
	var stops []func()
	for w := 0; w < 3; w++ {
		pub := h.NewTransport(t)
		stops = append(stops, background(t, func(bg context.Context) {
			for i := 0; bg.Err() == nil; i++ {
				ids, err := pub.Publish(ctx, []*backendpb.ClientEnvelope{GroupMessage(topic, []byte{byte(w), byte(i), byte(i >> 8)})})
				if errors.Is(err, ports.ErrRateLimited) {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				if err != nil {
					mu.Lock()
					if bg.Err() == nil {
						pubErr = err
					}
					mu.Unlock()
					return
				}
				mu.Lock()
				acked = append(acked, ids[0])
				mu.Unlock()
			}
		}))
	}
	stop := func() {
		for _, s := range stops {
			s()
		}
	}
	waitFor := func(n int) {
		for deadline := time.Now().Add(10 * time.Second); count() < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("only %d of %d publishes acknowledged", count(), n)
			}
		}
	}
	waitFor(20)
	sub, err := tr.Subscribe(ctx, []ports.TopicCursor{{Topic: topic}})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer sub.Close()
	waitFor(count() + 40) // publishes go on while the subscription goes live
	stop()
	if pubErr != nil {
		t.Fatalf("Publish: %v", pubErr)
	}
	expectIDs(t, ctx, sub, map[string][]uint64{string(topic): ascending(acked)})
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if e, err := sub.Next(short); err == nil {
		t.Fatalf("subscription delivered id %d after every acknowledged one (a duplicate or a stray)", e.GetSequenceId())
	}
}

// What a transport returns belongs to the caller: changing a result (of
// Query, QueryNewest or a subscription) changes no other caller's result,
// and changing an envelope after Publish returned changes nothing stored.
func testResultsDoNotShareMemory(t *testing.T, h Harness) {
	ctx := testCtx(t)
	alice, bob := h.NewTransport(t), h.NewTransport(t)
	topic := RandomGroupTopic()
	env := GroupMessage(topic, []byte("original"))
	publish(t, ctx, alice, env)
	env.GetPayload().(*backendpb.ClientEnvelope_GroupMessage).GroupMessage[0] = 'X'
	env.TargetTopic = RandomGroupTopic()

	payload := func(e *backendpb.OriginatorEnvelope) []byte { return e.GetEnvelope().GetGroupMessage() }
	spoil := func(e *backendpb.OriginatorEnvelope) {
		if p := payload(e); len(p) > 0 {
			p[0] = 'Y'
		}
		e.SequenceId++
	}
	want := func(what string, e *backendpb.OriginatorEnvelope, wantID uint64) {
		t.Helper()
		if !bytes.Equal(payload(e), []byte("original")) || e.GetSequenceId() != wantID {
			t.Fatalf("%s: id %d payload %q, want id %d %q: results share memory", what, e.GetSequenceId(), payload(e), wantID, "original")
		}
	}
	page, err := alice.Query(ctx, topic, 0, 0)
	if err != nil || len(page) != 1 {
		t.Fatalf("Query = %d envelopes, %v", len(page), err)
	}
	id := page[0].GetSequenceId()
	want("an envelope changed by its publisher after Publish", page[0], id)
	spoil(page[0])
	for name, tr := range map[string]ports.Transport{"the same transport": alice, "another transport": bob} {
		again, err := tr.Query(ctx, topic, 0, 0)
		if err != nil || len(again) != 1 {
			t.Fatalf("Query = %d envelopes, %v", len(again), err)
		}
		want("Query by "+name+" after a caller changed its result", again[0], id)
		newest, err := tr.QueryNewest(ctx, topic)
		if err != nil {
			t.Fatalf("QueryNewest: %v", err)
		}
		want("QueryNewest by "+name, newest, id)
		spoil(newest)
	}
	subA, err := alice.Subscribe(ctx, []ports.TopicCursor{{Topic: topic}})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer subA.Close()
	subB, err := bob.Subscribe(ctx, []ports.TopicCursor{{Topic: topic}})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer subB.Close()
	second := publish(t, ctx, alice, GroupMessage(topic, []byte("original")))[0]
	for _, wantID := range []uint64{id, second} {
		a := next(t, ctx, subA)
		want("first subscription", a, wantID)
		spoil(a)
		want("second subscription after the first changed its envelope", next(t, ctx, subB), wantID)
	}
	last, err := bob.QueryNewest(ctx, topic)
	if err != nil {
		t.Fatalf("QueryNewest: %v", err)
	}
	want("QueryNewest after subscribers changed theirs", last, second)
}
