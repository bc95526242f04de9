package transporttest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// COMP-041 (API-286…289): a topic's ids start at 1 and
// strictly increase, across batches and within one; topics are independent.
func testIDsStartAtOne(t *testing.T, h Harness) {
	ctx, tr := testCtx(t), h.NewTransport(t)
	a, b := RandomGroupTopic(), RandomGroupTopic()
	ids := publish(t, ctx, tr, GroupMessage(a, []byte("a1")))
	if ids[0] != 1 {
		t.Fatalf("first id on a topic = %d, want 1", ids[0])
	}
	ids = publish(t, ctx, tr, GroupMessage(a, []byte("a2")), GroupMessage(b, []byte("b1")), GroupMessage(a, []byte("a3")))
	if want := []uint64{2, 1, 3}; fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("batch ids = %v, want %v", ids, want)
	}
}

// API-201: a read returns a prefix of the topic in sequence id order, with
// the payloads as published.
func testPrefixInOrder(t *testing.T, h Harness) {
	ctx, tr := testCtx(t), h.NewTransport(t)
	topic := RandomGroupTopic()
	for i := 0; i < 5; i++ {
		publish(t, ctx, tr, GroupMessage(topic, []byte{byte(i)}))
	}
	got := queryAll(t, ctx, tr, topic)
	if len(got) != 5 {
		t.Fatalf("read %d envelopes, want 5", len(got))
	}
	checkPrefix(t, got)
	for i, e := range got {
		if !bytes.Equal(e.GetEnvelope().GetGroupMessage(), []byte{byte(i)}) {
			t.Fatalf("envelope %d payload = %x", i, e.GetEnvelope().GetGroupMessage())
		}
		if e.GetServerTimestampNs() == 0 {
			t.Fatalf("envelope %d has no server timestamp", i)
		}
	}
	tail, err := tr.Query(ctx, topic, 3, 0)
	if err != nil || len(tail) != 2 || tail[0].GetSequenceId() != 4 {
		t.Fatalf("Query after 3 = %v, %v; want ids 4, 5", ids(tail), err)
	}
}

func ids(envs []*backendpb.OriginatorEnvelope) []uint64 {
	out := make([]uint64, len(envs))
	for i, e := range envs {
		out[i] = e.GetSequenceId()
	}
	return out
}

// Paging: limit bounds a page, pages continue from the last id, and an
// empty page ends the topic.
func testPaging(t *testing.T, h Harness) {
	ctx, tr := testCtx(t), h.NewTransport(t)
	topic := RandomGroupTopic()
	batch := make([]*backendpb.ClientEnvelope, 10)
	for i := range batch {
		batch[i] = GroupMessage(topic, []byte{byte(i)})
	}
	publish(t, ctx, tr, batch...)
	var seen []uint64
	var after uint64
	for {
		page, err := tr.Query(ctx, topic, after, 3)
		if err != nil {
			t.Fatalf("Query: %v", err)
		}
		if len(page) > 3 {
			t.Fatalf("page of %d with limit 3", len(page))
		}
		if len(page) == 0 {
			break
		}
		seen = append(seen, ids(page)...)
		after = page[len(page)-1].GetSequenceId()
	}
	if fmt.Sprint(seen) != fmt.Sprint([]uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
		t.Fatalf("paged ids = %v", seen)
	}
}

// QueryNewest returns the highest-id envelope, ErrNotFound on an empty topic.
func testNewest(t *testing.T, h Harness) {
	ctx, tr := testCtx(t), h.NewTransport(t)
	topic := RandomGroupTopic()
	if _, err := tr.QueryNewest(ctx, topic); !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("QueryNewest on empty topic: %v, want ErrNotFound", err)
	}
	publish(t, ctx, tr, GroupMessage(topic, []byte("old")), GroupMessage(topic, []byte("new")))
	e, err := tr.QueryNewest(ctx, topic)
	if err != nil || e.GetSequenceId() != 2 || string(e.GetEnvelope().GetGroupMessage()) != "new" {
		t.Fatalf("QueryNewest = %v, %v; want id 2 \"new\"", e, err)
	}
}

// API-244: the highest sequence id of a topic, 0 when empty.
func testHighest(t *testing.T, h Harness) {
	ctx, tr := testCtx(t), h.NewTransport(t)
	topic := RandomGroupTopic()
	if n, err := tr.HighestSequenceID(ctx, topic); err != nil || n != 0 {
		t.Fatalf("HighestSequenceID on empty = %d, %v; want 0", n, err)
	}
	publish(t, ctx, tr, GroupMessage(topic, []byte("1")), GroupMessage(topic, []byte("2")), GroupMessage(topic, []byte("3")))
	if n, err := tr.HighestSequenceID(ctx, topic); err != nil || n != 3 {
		t.Fatalf("HighestSequenceID = %d, %v; want 3", n, err)
	}
}

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

// expect reads n envelopes and checks they continue topic's ids from after.
func expect(t *testing.T, ctx context.Context, s ports.Subscription, cursors map[string]uint64, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		e := next(t, ctx, s)
		topic := string(e.GetEnvelope().GetTargetTopic())
		want := cursors[topic] + 1
		if e.GetSequenceId() != want {
			t.Fatalf("subscription delivered id %d on a topic whose next id is %d (gap or duplicate)", e.GetSequenceId(), want)
		}
		cursors[topic] = want
	}
}

// A subscription delivers the backlog after its cursor, then new envelopes,
// in order per topic.
func testSubscribeBacklog(t *testing.T, h Harness) {
	ctx, tr := testCtx(t), h.NewTransport(t)
	a, b := RandomGroupTopic(), RandomGroupTopic()
	publish(t, ctx, tr, GroupMessage(a, []byte("1")), GroupMessage(a, []byte("2")), GroupMessage(b, []byte("1")))
	sub, err := tr.Subscribe(ctx, []ports.TopicCursor{{Topic: a, After: 1}, {Topic: b}})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer sub.Close()
	cur := map[string]uint64{string(a): 1, string(b): 0}
	expect(t, ctx, sub, cur, 2)
	publish(t, ctx, tr, GroupMessage(b, []byte("2")), GroupMessage(a, []byte("3")))
	expect(t, ctx, sub, cur, 2)
	if cur[string(a)] != 3 || cur[string(b)] != 2 {
		t.Fatalf("cursors after stream = %v", cur)
	}
	if err := sub.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := sub.Next(ctx); !errors.Is(err, ports.ErrClosed) {
		t.Fatalf("Next after Close: %v, want ErrClosed", err)
	}
}

// A client that closes its subscription and subscribes again from the last
// delivered cursor misses nothing and sees nothing twice.
func testSubscribeResume(t *testing.T, h Harness) {
	ctx, tr := testCtx(t), h.NewTransport(t)
	topic := RandomGroupTopic()
	publish(t, ctx, tr, GroupMessage(topic, []byte("1")), GroupMessage(topic, []byte("2")))
	sub, err := tr.Subscribe(ctx, []ports.TopicCursor{{Topic: topic}})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	cur := map[string]uint64{string(topic): 0}
	expect(t, ctx, sub, cur, 1)
	sub.Close()
	publish(t, ctx, tr, GroupMessage(topic, []byte("3")))
	sub, err = tr.Subscribe(ctx, []ports.TopicCursor{{Topic: topic, After: cur[string(topic)]}})
	if err != nil {
		t.Fatalf("re-Subscribe: %v", err)
	}
	defer sub.Close()
	expect(t, ctx, sub, cur, 2)
	publish(t, ctx, tr, GroupMessage(topic, []byte("4")))
	expect(t, ctx, sub, cur, 1)
}

// A subscription open while the service restarts resumes from its last
// delivered cursor by itself: no gap, no duplicate.
func testSubscribeBounce(t *testing.T, h Harness) {
	if !h.Caps().Bounce {
		t.Skip("harness cannot restart its service (Caps.Bounce is false)")
	}
	ctx, tr := testCtx(t), h.NewTransport(t)
	topic := RandomGroupTopic()
	publish(t, ctx, tr, GroupMessage(topic, []byte("1")), GroupMessage(topic, []byte("2")))
	sub, err := tr.Subscribe(ctx, []ports.TopicCursor{{Topic: topic}})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer sub.Close()
	cur := map[string]uint64{string(topic): 0}
	expect(t, ctx, sub, cur, 2)
	h.Bounce(t)
	// The transport reconnects by itself; retry while the service comes back.
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := tr.Publish(ctx, []*backendpb.ClientEnvelope{GroupMessage(topic, []byte("3"))})
		if err == nil {
			break
		}
		if !errors.Is(err, ports.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("Publish after restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	expect(t, ctx, sub, cur, 1)
	if cur[string(topic)] != 3 {
		t.Fatalf("after restart the subscription is at %d, want 3", cur[string(topic)])
	}
}

// COMP-050 (API-230, API-300): a sealed commit-log entry
// signed under its commit_log_id over CommitLogEntryTBS is stored; one
// signed by another key, over another topic, or with a flipped bit is not.
func testPublishSignature(t *testing.T, h Harness) {
	ctx, tr := testCtx(t), h.NewTransport(t)
	pub, priv, _ := ed25519.GenerateKey(nil)
	good := SealedEntry(priv, random(12), []byte("ciphertext"))
	if ids := publish(t, ctx, tr, good); ids[0] != 1 {
		t.Fatalf("first commit-log id = %d", ids[0])
	}
	_, other, _ := ed25519.GenerateKey(nil)
	wrongKey := SealedEntry(other, random(12), []byte("c"))
	wrongKey.TargetTopic = Topic(ports.TopicCommitLog, pub)
	wrongKey.GetSealedCommitLogEntry().CommitLogId = pub
	flipped := SealedEntry(priv, random(12), []byte("ciphertext"))
	flipped.GetSealedCommitLogEntry().Ciphertext[0] ^= 1
	noCtx := SealedEntry(priv, random(12), []byte("c"))
	tbsSig := ed25519.Sign(priv, []byte("c")) // plain Ed25519, not Ed25519ctx
	noCtx.GetSealedCommitLogEntry().Signature = tbsSig
	for name, env := range map[string]*backendpb.ClientEnvelope{"other key": wrongKey, "flipped ciphertext": flipped, "no context": noCtx} {
		_, err := tr.Publish(ctx, []*backendpb.ClientEnvelope{env})
		if !errors.Is(err, ports.ErrInvalidArgument) || !strings.Contains(err.Error(), "signature") {
			t.Errorf("%s: Publish = %v, want ErrInvalidArgument naming the signature", name, err)
		}
	}
	anon := h.NewAnonymousTransport(t)
	got, err := anon.Query(ctx, good.GetTargetTopic(), 0, 0)
	if err != nil || len(got) != 1 {
		t.Fatalf("commit-log topic holds %d envelopes (%v), want only the signed one", len(got), err)
	}
}

// COMP-040, COMP-042: refused envelopes fail with ErrInvalidArgument and a
// reason naming what was wrong: topic kind/payload mismatch, identifier length, size, empty or
// unknown payload, commit_log_id not naming the topic.
func testInvalidArgument(t *testing.T, h Harness) {
	ctx, tr := testCtx(t), h.NewTransport(t)
	_, priv, _ := ed25519.GenerateKey(nil)
	entry := SealedEntry(priv, random(12), []byte("c"))
	otherTopic := SealedEntry(priv, random(12), []byte("c"))
	otherTopic.TargetTopic = Topic(ports.TopicCommitLog, random(32))
	type tc struct {
		env    *backendpb.ClientEnvelope
		reason string
	}
	cases := map[string]tc{
		"group message on a commit-log topic": {GroupMessage(Topic(ports.TopicCommitLog, random(32)), []byte("x")), "payload"},
		"commit-log entry on a group topic":   {&backendpb.ClientEnvelope{TargetTopic: RandomGroupTopic(), Payload: entry.Payload}, "payload"},
		"group id of 20 bytes":                {GroupMessage(Topic(ports.TopicGroupMessages, random(20)), []byte("x")), "identifier"},
		"welcome id of 16 bytes":              {Welcome(random(16), []byte("w")), "identifier"},
		"unknown topic kind":                  {GroupMessage(Topic(0x7f, random(32)), []byte("x")), "kind"},
		"empty topic":                         {GroupMessage(nil, []byte("x")), "topic"},
		"no payload":                          {&backendpb.ClientEnvelope{TargetTopic: RandomGroupTopic()}, "payload"},
		"empty group message":                 {GroupMessage(RandomGroupTopic(), nil), "group_message"},
		"commit_log_id not the topic":         {otherTopic, "commit_log_id"},
	}
	if max := h.Caps().MaxEnvelopeBytes; max > 0 {
		cases["envelope over the size limit"] = tc{GroupMessage(RandomGroupTopic(), make([]byte, max+1)), "bytes"}
	}
	for name, c := range cases {
		_, err := tr.Publish(ctx, []*backendpb.ClientEnvelope{c.env})
		if !errors.Is(err, ports.ErrInvalidArgument) {
			t.Errorf("%s: Publish = %v, want ErrInvalidArgument", name, err)
			continue
		}
		if !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: reason %q does not mention %q", name, err, c.reason)
		}
	}
	if _, err := tr.Query(ctx, Topic(ports.TopicGroupMessages, random(7)), 0, 0); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Errorf("Query on a 7-byte group id: %v, want ErrInvalidArgument", err)
	}
}

// A batch with one refused envelope stores none of it (API-224).
func testBatchAtomic(t *testing.T, h Harness) {
	ctx, tr := testCtx(t), h.NewTransport(t)
	topic := RandomGroupTopic()
	_, err := tr.Publish(ctx, []*backendpb.ClientEnvelope{GroupMessage(topic, []byte("ok")), GroupMessage(topic, nil)})
	if !errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("Publish = %v, want ErrInvalidArgument", err)
	}
	if n, err := tr.HighestSequenceID(ctx, topic); err != nil || n != 0 {
		t.Fatalf("after a refused batch the topic's highest id = %d, %v; want 0", n, err)
	}
	if ids := publish(t, ctx, tr, GroupMessage(topic, []byte("ok"))); ids[0] != 1 {
		t.Fatalf("first stored id after a refused batch = %d, want 1 (ids were consumed)", ids[0])
	}
}

// FORK-021 relies on this: concurrent publishers to one topic get distinct
// ids that together are exactly 1..n, each publisher's later publish gets a
// higher id than its earlier one (API-289), and the topic reads back as a
// prefix in order.
func testConcurrentPublishers(t *testing.T, h Harness) {
	ctx := testCtx(t)
	topic := RandomGroupTopic()
	const writers, each = 6, 15
	var wg sync.WaitGroup
	got := make([][]uint64, writers)
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		tr := h.NewTransport(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				id, err := tr.Publish(ctx, []*backendpb.ClientEnvelope{GroupMessage(topic, []byte{byte(w), byte(i)})})
				if err != nil {
					errs <- err
					return
				}
				got[w] = append(got[w], id[0])
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent Publish: %v", err)
	}
	seen := make(map[uint64]bool)
	for w, list := range got {
		for i, id := range list {
			if seen[id] {
				t.Fatalf("id %d assigned twice", id)
			}
			seen[id] = true
			if i > 0 && id <= list[i-1] {
				t.Fatalf("writer %d: publish after id %d got %d", w, list[i-1], id)
			}
		}
	}
	all := queryAll(t, ctx, h.NewTransport(t), topic)
	if len(all) != writers*each {
		t.Fatalf("topic holds %d envelopes, want %d", len(all), writers*each)
	}
	checkPrefix(t, all)
}

// COMP-041, and FORK-030 relies on it: while publishers write, every read of the topic
// is a prefix — id n+1 is never visible without n.
func testReaderNeverSeesGap(t *testing.T, h Harness) {
	ctx := testCtx(t)
	topic := RandomGroupTopic()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		tr := h.NewTransport(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := tr.Publish(ctx, []*backendpb.ClientEnvelope{GroupMessage(topic, []byte{byte(w), byte(i)})}); err != nil {
					t.Errorf("Publish: %v", err)
					return
				}
			}
		}()
	}
	reader := h.NewTransport(t)
	deadline := time.Now().Add(time.Second)
	reads := 0
	for time.Now().Before(deadline) && !t.Failed() {
		page, err := reader.Query(ctx, topic, 0, 1000)
		if err != nil {
			t.Fatalf("Query: %v", err)
		}
		checkPrefix(t, page)
		reads++
	}
	close(stop)
	wg.Wait()
	if reads == 0 {
		t.Fatal("no read completed")
	}
}

// COMP-081: reading a capability topic (commit-log, welcome) needs no identity;
// publishing and reading a group-message topic do.
func testAnonymous(t *testing.T, h Harness) {
	ctx, tr, anon := testCtx(t), h.NewTransport(t), h.NewAnonymousTransport(t)
	_, priv, _ := ed25519.GenerateKey(nil)
	entry := SealedEntry(priv, random(12), []byte("c"))
	welcome := Welcome(random(32), []byte("w"))
	group := RandomGroupTopic()
	publish(t, ctx, tr, entry, welcome, GroupMessage(group, []byte("g")))
	for _, topic := range [][]byte{entry.GetTargetTopic(), welcome.GetTargetTopic()} {
		if got, err := anon.Query(ctx, topic, 0, 0); err != nil || len(got) != 1 {
			t.Errorf("anonymous Query of capability topic 0x%02x = %d envelopes, %v", topic[0], len(got), err)
		}
		sub, err := anon.Subscribe(ctx, []ports.TopicCursor{{Topic: topic}})
		if err != nil {
			t.Errorf("anonymous Subscribe of capability topic: %v", err)
			continue
		}
		expect(t, ctx, sub, map[string]uint64{string(topic): 0}, 1)
		sub.Close()
	}
	if _, err := anon.Publish(ctx, []*backendpb.ClientEnvelope{GroupMessage(group, []byte("x"))}); !errors.Is(err, ports.ErrUnauthenticated) {
		t.Errorf("anonymous Publish = %v, want ErrUnauthenticated", err)
	}
	if _, err := anon.Query(ctx, group, 0, 0); !errors.Is(err, ports.ErrUnauthenticated) {
		t.Errorf("anonymous Query of a group topic = %v, want ErrUnauthenticated", err)
	}
	if sub, err := anon.Subscribe(ctx, []ports.TopicCursor{{Topic: group}}); !errors.Is(err, ports.ErrUnauthenticated) {
		if sub != nil {
			sub.Close()
		}
		t.Errorf("anonymous Subscribe to a group topic = %v, want ErrUnauthenticated", err)
	}
}

// Every method honours ctx: an expired ctx fails at once, and Next returns
// when its ctx ends.
func testDeadline(t *testing.T, h Harness) {
	tr := h.NewTransport(t)
	topic := RandomGroupTopic()
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	start := time.Now()
	if _, err := tr.Publish(expired, []*backendpb.ClientEnvelope{GroupMessage(topic, []byte("x"))}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Publish with expired ctx = %v, want DeadlineExceeded", err)
	}
	if _, err := tr.Query(expired, topic, 0, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Query with expired ctx = %v, want DeadlineExceeded", err)
	}
	if _, err := tr.HighestSequenceID(expired, topic); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("HighestSequenceID with expired ctx = %v, want DeadlineExceeded", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("expired-ctx calls took %v", time.Since(start))
	}
	ctx := testCtx(t)
	sub, err := tr.Subscribe(ctx, []ports.TopicCursor{{Topic: topic}})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer sub.Close()
	short, cancel2 := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel2()
	start = time.Now()
	if _, err := sub.Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Next on an idle topic = %v, want DeadlineExceeded", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("Next ignored its deadline for %v", time.Since(start))
	}
}
