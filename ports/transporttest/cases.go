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

// COMP-041 (API-286…289): ids are positive and strictly increase on a
// topic, across batches and within one, where they follow input order
// also across topics; each envelope reads back with exactly the id its
// publish returned. The ids of one topic have gaps where other topics
// took ids (one counter serves every topic), so none is expected to be 1.
func testIDsIncrease(t *testing.T, h Harness) {
	ctx, tr := testCtx(t), h.NewTransport(t)
	a, b := RandomGroupTopic(), RandomGroupTopic()
	first := publish(t, ctx, tr, GroupMessage(a, []byte("a1")))[0]
	batch := publish(t, ctx, tr, GroupMessage(a, []byte("a2")), GroupMessage(b, []byte("b1")), GroupMessage(a, []byte("a3")))
	if first == 0 || !(first < batch[0] && batch[0] < batch[1] && batch[1] < batch[2]) {
		t.Fatalf("ids %d then %v: want positive ids increasing in publish and input order", first, batch)
	}
	gotA := queryAll(t, ctx, tr, a)
	checkIDs(t, "topic a", gotA, []uint64{first, batch[0], batch[2]})
	for i, want := range []string{"a1", "a2", "a3"} {
		if got := string(gotA[i].GetEnvelope().GetGroupMessage()); got != want {
			t.Fatalf("topic a envelope %d = %q, want %q", i, got, want)
		}
	}
	checkIDs(t, "topic b", queryAll(t, ctx, tr, b), []uint64{batch[1]})
}

// API-289 on every topic: a publish that starts after an envelope is
// visible gets a higher id, whatever the two topics and connections.
// FORK-077 relies on it (a commit-log entry is published after its commit
// on the group topic was read, so its id is higher than the commit's), and
// so do JOIN-037 (a Welcome's message_cursor is a group-topic id below the
// Welcome's own) and JOIN-050 (identity ids compared with a Welcome's). A
// service numbering each topic from 1 fails here.
func testLaterPublishHigher(t *testing.T, h Harness) {
	ctx := testCtx(t)
	alice, bob := h.NewTransport(t), h.NewTransport(t)
	_, priv, _ := ed25519.GenerateKey(nil)
	group, welcomeKey := RandomGroupTopic(), random(32)
	var last uint64
	for round := 0; round < 3; round++ {
		steps := []struct {
			name string
			tr   ports.Transport
			env  *backendpb.ClientEnvelope
		}{
			{"commit on the group topic", alice, GroupMessage(group, []byte{byte(round)})},
			{"commit-log entry naming it", bob, SealedEntry(priv, random(12), []byte{byte(round)})},
			{"Welcome whose cursor names it", alice, Welcome(welcomeKey, []byte{byte(round)})},
			{"message on another group topic", bob, GroupMessage(RandomGroupTopic(), []byte{byte(round)})},
		}
		for _, st := range steps {
			id := publish(t, ctx, st.tr, st.env)[0]
			if id <= last {
				t.Fatalf("round %d, %s: id %d, not above %d of the envelope published and visible before it (API-289)", round, st.name, id, last)
			}
			// The envelope is visible: the other connection reads it.
			other := map[ports.Transport]ports.Transport{alice: bob, bob: alice}[st.tr]
			if e, err := other.QueryNewest(ctx, st.env.GetTargetTopic()); err != nil || e.GetSequenceId() != id {
				t.Fatalf("round %d, %s: newest on its topic = %v, %v; want id %d", round, st.name, e, err, id)
			}
			last = id
		}
	}
}

// API-201: a read returns a prefix of the topic in sequence id order, with
// the payloads as published, while another topic takes ids in between.
func testPrefixInOrder(t *testing.T, h Harness) {
	ctx, tr := testCtx(t), h.NewTransport(t)
	topic, other := RandomGroupTopic(), RandomGroupTopic()
	var want []uint64
	for i := 0; i < 5; i++ {
		want = append(want, publish(t, ctx, tr, GroupMessage(topic, []byte{byte(i)}))[0])
		publish(t, ctx, tr, GroupMessage(other, []byte{byte(i)}))
	}
	got := queryAll(t, ctx, tr, topic)
	checkIDs(t, "topic", got, want)
	for i, e := range got {
		if !bytes.Equal(e.GetEnvelope().GetGroupMessage(), []byte{byte(i)}) {
			t.Fatalf("envelope %d payload = %x", i, e.GetEnvelope().GetGroupMessage())
		}
		if e.GetServerTimestampNs() == 0 {
			t.Fatalf("envelope %d has no server timestamp", i)
		}
	}
	tail, err := tr.Query(ctx, topic, want[2], 0)
	if err != nil {
		t.Fatalf("Query after %d: %v", want[2], err)
	}
	checkIDs(t, "query after the third id", tail, want[3:])
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
	want := publish(t, ctx, tr, batch...)
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
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("paged ids = %v, published %v", seen, want)
	}
}

// QueryNewest returns the highest-id envelope, ErrNotFound on an empty topic.
func testNewest(t *testing.T, h Harness) {
	ctx, tr := testCtx(t), h.NewTransport(t)
	topic := RandomGroupTopic()
	if _, err := tr.QueryNewest(ctx, topic); !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("QueryNewest on empty topic: %v, want ErrNotFound", err)
	}
	ids := publish(t, ctx, tr, GroupMessage(topic, []byte("old")), GroupMessage(topic, []byte("new")))
	publish(t, ctx, tr, GroupMessage(RandomGroupTopic(), []byte("elsewhere")))
	e, err := tr.QueryNewest(ctx, topic)
	if err != nil || e.GetSequenceId() != ids[1] || string(e.GetEnvelope().GetGroupMessage()) != "new" {
		t.Fatalf("QueryNewest = %v, %v; want id %d \"new\"", e, err, ids[1])
	}
}

// API-244: the highest sequence id of a topic, 0 when empty.
func testHighest(t *testing.T, h Harness) {
	ctx, tr := testCtx(t), h.NewTransport(t)
	topic := RandomGroupTopic()
	if n, err := tr.HighestSequenceID(ctx, topic); err != nil || n != 0 {
		t.Fatalf("HighestSequenceID on empty = %d, %v; want 0", n, err)
	}
	ids := publish(t, ctx, tr, GroupMessage(topic, []byte("1")), GroupMessage(topic, []byte("2")), GroupMessage(topic, []byte("3")))
	if n, err := tr.HighestSequenceID(ctx, topic); err != nil || n != ids[2] {
		t.Fatalf("HighestSequenceID = %d, %v; want %d", n, err, ids[2])
	}
	// The topic's own highest id, not the service's: other topics do not move it.
	publish(t, ctx, tr, GroupMessage(RandomGroupTopic(), []byte("4")))
	if n, err := tr.HighestSequenceID(ctx, topic); err != nil || n != ids[2] {
		t.Fatalf("HighestSequenceID after a publish elsewhere = %d, %v; want %d", n, err, ids[2])
	}
}

// COMP-050 (API-230, API-300): a sealed commit-log entry
// signed under its commit_log_id over CommitLogEntryTBS is stored; one
// signed by another key, over another topic, or with a flipped bit is not.
func testPublishSignature(t *testing.T, h Harness) {
	ctx, tr := testCtx(t), h.NewTransport(t)
	pub, priv, _ := ed25519.GenerateKey(nil)
	good := SealedEntry(priv, random(12), []byte("ciphertext"))
	goodID := publish(t, ctx, tr, good)[0]
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
	if err != nil || len(got) != 1 || got[0].GetSequenceId() != goodID {
		t.Fatalf("commit-log topic holds ids %v (%v), want only the signed one's %d", ids(got), err, goodID)
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
	id := publish(t, ctx, tr, GroupMessage(topic, []byte("ok")))[0]
	checkIDs(t, "topic after a refused batch and one stored envelope", queryAll(t, ctx, tr, topic), []uint64{id})
}

// FORK-021 relies on this: concurrent publishers over two topics (some
// batches naming both) get distinct ids; each publisher's later publish
// gets a higher id than its earlier one whatever their topics (API-289);
// and each topic reads back as exactly the ids acknowledged on it,
// ascending: none lost, none twice.
func testConcurrentPublishers(t *testing.T, h Harness) {
	ctx := testCtx(t)
	topics := [][]byte{RandomGroupTopic(), RandomGroupTopic()}
	const writers, each = 6, 15
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := make(map[string][]uint64)
	seen := make(map[uint64]bool)
	for w := 0; w < writers; w++ {
		tr := h.NewTransport(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last uint64
			for i := 0; i < each; i++ {
				batch := []*backendpb.ClientEnvelope{GroupMessage(topics[(w+i)%2], []byte{byte(w), byte(i)})}
				if i%4 == 3 {
					batch = append(batch, GroupMessage(topics[(w+i+1)%2], []byte{byte(w), byte(i), 1}))
				}
				got, err := tr.Publish(ctx, batch)
				if err != nil {
					t.Errorf("concurrent Publish: %v", err)
					return
				}
				mu.Lock()
				for j, id := range got {
					if seen[id] {
						t.Errorf("id %d assigned twice", id)
					}
					seen[id] = true
					if id <= last {
						t.Errorf("writer %d: publish after id %d got %d (API-289)", w, last, id)
					}
					last = id
					acked[string(batch[j].GetTargetTopic())] = append(acked[string(batch[j].GetTargetTopic())], id)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	reader := h.NewTransport(t)
	for i, topic := range topics {
		checkIDs(t, fmt.Sprintf("topic %d", i), queryAll(t, ctx, reader, topic), ascending(acked[string(topic)]))
	}
}

// COMP-041, and FORK-030 relies on it: within one topic an id is never
// visible before a lower id of the topic. A reader that re-reads the topic
// from its cursor while publishers write to it (and to another topic)
// ends with exactly the acknowledged ids of the topic, ascending: it never
// saw an id whose lower neighbour on the topic became visible only later.
func testReaderFromCursor(t *testing.T, h Harness) {
	ctx := testCtx(t)
	topic, other := RandomGroupTopic(), RandomGroupTopic()
	var mu sync.Mutex
	var acked []uint64
	var stops []func()
	for w := 0; w < 4; w++ {
		tr := h.NewTransport(t)
		stops = append(stops, background(t, func(bg context.Context) {
			for i := 0; bg.Err() == nil; i++ {
				batch := []*backendpb.ClientEnvelope{GroupMessage(topic, []byte{byte(w), byte(i)})}
				if (w+i)%2 == 1 {
					batch = []*backendpb.ClientEnvelope{GroupMessage(other, []byte{byte(w), byte(i)}), batch[0]}
				}
				got, err := tr.Publish(ctx, batch)
				if errors.Is(err, ports.ErrRateLimited) {
					time.Sleep(10 * time.Millisecond) // a limited service asks for a delay
					continue
				}
				if err != nil {
					if bg.Err() == nil {
						t.Errorf("Publish: %v", err)
					}
					return
				}
				mu.Lock()
				acked = append(acked, got[len(got)-1])
				mu.Unlock()
			}
		}))
	}
	// The publishers stop before the case ends, however it ends (t.Cleanup
	// waits for them too).
	stopAll := func() {
		for _, stop := range stops {
			stop()
		}
	}
	reader := h.NewTransport(t)
	var read []uint64
	var cursor uint64
	drain := func() {
		for {
			page, err := reader.Query(ctx, topic, cursor, 1000)
			if errors.Is(err, ports.ErrRateLimited) {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if err != nil {
				t.Fatalf("Query: %v", err)
			}
			if len(page) == 0 {
				return
			}
			for _, e := range page {
				if e.GetSequenceId() <= cursor {
					t.Fatalf("Query after %d returned id %d", cursor, e.GetSequenceId())
				}
				read = append(read, e.GetSequenceId())
				cursor = e.GetSequenceId()
			}
		}
	}
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline) && !t.Failed(); {
		drain()
	}
	stopAll()
	drain()
	if len(acked) == 0 {
		t.Fatal("no publish was acknowledged")
	}
	if want := ascending(acked); fmt.Sprint(read) != fmt.Sprint(want) {
		t.Fatalf("reader from its cursor read %d ids, %d acknowledged; first difference at %d",
			len(read), len(want), firstDiff(read, want))
	}
}

func firstDiff(a, b []uint64) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// COMP-081: reading a capability topic (commit-log, welcome) needs no identity;
// publishing and reading a group-message topic do.
func testAnonymous(t *testing.T, h Harness) {
	ctx, tr, anon := testCtx(t), h.NewTransport(t), h.NewAnonymousTransport(t)
	_, priv, _ := ed25519.GenerateKey(nil)
	entry := SealedEntry(priv, random(12), []byte("c"))
	welcome := Welcome(random(32), []byte("w"))
	group := RandomGroupTopic()
	published := publish(t, ctx, tr, entry, welcome, GroupMessage(group, []byte("g")))
	for i, topic := range [][]byte{entry.GetTargetTopic(), welcome.GetTargetTopic()} {
		if got, err := anon.Query(ctx, topic, 0, 0); err != nil || len(got) != 1 || got[0].GetSequenceId() != published[i] {
			t.Errorf("anonymous Query of capability topic 0x%02x = ids %v, %v; want [%d]", topic[0], ids(got), err, published[i])
		}
		sub, err := anon.Subscribe(ctx, []ports.TopicCursor{{Topic: topic}})
		if err != nil {
			t.Errorf("anonymous Subscribe of capability topic: %v", err)
			continue
		}
		t.Cleanup(func() { sub.Close() })
		expectIDs(t, ctx, sub, map[string][]uint64{string(topic): {published[i]}})
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
