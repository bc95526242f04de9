package delivery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/transporttest"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// COMP-140: after its backlog, a subscription of 1,024 topics woken by a
// publish to one of them reads that topic only, not all 1,024 (the
// count of store reads is checked, not a timing).
func TestCOMP140_WakeReadsOnlyWokenTopics(t *testing.T) {
	store := newMemStore()
	svc := New(store, withClock(nil))
	var cursors []ports.TopicCursor
	for i := 0; i < 1024; i++ {
		cursors = append(cursors, ports.TopicCursor{Topic: transporttest.RandomGroupTopic()})
	}
	sub, err := svc.Subscribe(ctx(t), authed, cursors)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	// The backlog: every topic read once, all empty.
	short, cancel := context.WithTimeout(ctx(t), 200*time.Millisecond)
	defer cancel()
	if _, err := sub.Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next on empty topics = %v", err)
	}
	if n := store.rangeCalls(); n != 1024 {
		t.Fatalf("the backlog took %d reads, want one per topic", n)
	}
	shared := cursors[500].Topic
	for round := 0; round < 10; round++ {
		ids, err := svc.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{transporttest.GroupMessage(shared, []byte{byte(round)})})
		if err != nil {
			t.Fatal(err)
		}
		before := store.rangeCalls()
		e, err := sub.Next(ctx(t))
		if err != nil || e.GetSequenceId() != ids[0] {
			t.Fatalf("Next = %v, %v; want id %d", e, err, ids[0])
		}
		if n := store.rangeCalls() - before; n > 2 {
			t.Fatalf("a wake of one topic cost %d store reads", n)
		}
	}
}

// COMP-140: pages read for subscriptions count against the service's
// read budget until handed out: with room for two pages, two
// subscriptions that never take their envelopes exhaust it, a Query then
// waits (and gives up with its ctx, ErrUnavailable), and it succeeds once
// one of them is closed. The budget in use returns to zero.
func TestCOMP140_ReadBudgetHeldByUnreadPages(t *testing.T) {
	const page = 64 << 10
	svc := New(newMemStore(), withClock(&Options{MaxEnvelopeBytes: page, MaxPageBytes: page, ReadBudgetBytes: 2 * page}))
	var topics [][]byte
	for i := 0; i < 2; i++ {
		topic := transporttest.RandomGroupTopic()
		topics = append(topics, topic)
		for j := 0; j < 4; j++ {
			if _, err := svc.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{
				transporttest.GroupMessage(topic, bytes.Repeat([]byte{1}, page/3))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var subs []ports.Subscription
	for _, topic := range topics {
		sub, err := svc.Subscribe(ctx(t), authed, []ports.TopicCursor{{Topic: topic}})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		if _, err := sub.Next(ctx(t)); err != nil { // reads a page, takes one envelope
			t.Fatal(err)
		}
		subs = append(subs, sub)
	}
	if used := svc.ReadBudgetInUse(); used < page || used > 2*page {
		t.Fatalf("budget in use %d with two pages held", used)
	}
	short, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond)
	defer cancel()
	if _, err := svc.Query(short, authed, topics[0], 0, 0); !errors.Is(err, ports.ErrUnavailable) {
		t.Fatalf("Query with the budget held = %v, want ErrUnavailable", err)
	}
	subs[0].Close()
	if got, err := svc.Query(ctx(t), authed, topics[0], 0, 0); err != nil || len(got) == 0 {
		t.Fatalf("Query after a subscription freed its page = %d, %v", len(got), err)
	}
	// A reader that takes its envelopes gives each one's budget back:
	// it reads a topic of many pages (more than the whole budget)
	// without closing.
	subs[1].Close()
	long := transporttest.RandomGroupTopic()
	for j := 0; j < 12; j++ {
		if _, err := svc.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{
			transporttest.GroupMessage(long, bytes.Repeat([]byte{2}, page/3))}); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := svc.Subscribe(ctx(t), authed, []ports.TopicCursor{{Topic: long}})
	if err != nil {
		t.Fatal(err)
	}
	for j := 0; j < 12; j++ {
		wait, cancel := context.WithTimeout(ctx(t), 5*time.Second)
		_, err := sub.Next(wait)
		cancel()
		if err != nil {
			t.Fatalf("envelope %d of a topic of 4 budgets: %v (budget in use %d)", j, err, svc.ReadBudgetInUse())
		}
	}
	sub.Close()
	if used := svc.ReadBudgetInUse(); used != 0 {
		t.Fatalf("budget in use %d after every read ended", used)
	}
}

// failingAppend stores the batch, then reports a failure: what a
// publisher sees when its ctx ends or its connection drops while the
// commit completes.
type failingAppend struct{ ports.EnvelopeStore }

func (f failingAppend) Append(ctx context.Context, envs []ports.NewStoredEnvelope) ([]uint64, error) {
	if _, err := f.EnvelopeStore.Append(ctx, envs); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("append: %w: connection lost during commit", ports.ErrUnavailable)
}

// COMP-142: a publish whose Append failed after committing still wakes
// the topic's subscribers, so they get the envelope without polling and
// without another publish.
func TestCOMP142_FailedAppendStillWakes(t *testing.T) {
	svc := New(failingAppend{newMemStore()}, withClock(nil))
	topic := transporttest.RandomGroupTopic()
	sub, err := svc.Subscribe(ctx(t), authed, []ports.TopicCursor{{Topic: topic}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	short, cancel := context.WithTimeout(ctx(t), 50*time.Millisecond)
	defer cancel()
	if _, err := sub.Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next on an empty topic = %v", err)
	}
	if _, err := svc.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{transporttest.GroupMessage(topic, []byte("x"))}); err == nil {
		t.Fatal("Publish reported success")
	}
	wait, cancel2 := context.WithTimeout(ctx(t), 10*time.Second)
	defer cancel2()
	if e, err := sub.Next(wait); err != nil || string(e.GetEnvelope().GetGroupMessage()) != "x" {
		t.Fatalf("subscriber after a failed-but-committed publish: %v, %v", e, err)
	}
}
