package delivery

import (
	"crypto/ed25519"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/transporttest"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// recorder is an Observer that keeps what it was told.
type recorder struct {
	mu        sync.Mutex
	published map[string]int
	refused   map[string]int // "kind/reason"
	lags      []time.Duration
}

func newRecorder() *recorder {
	return &recorder{published: map[string]int{}, refused: map[string]int{}}
}

func (r *recorder) Published(kinds []string, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range kinds {
		r.published[k]++
	}
}

func (r *recorder) Refused(kind, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused[kind+"/"+reason]++
}

func (r *recorder) Delivered(lag time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lags = append(r.lags, lag)
}

// The observer hears every stored envelope by its topic kind, every
// refusal by the kind of the refused envelope and the reason, and every
// delivery with its lag on the service's clock — counted here against the
// publishes the test made.
func TestObserver_PublishesRefusalsDeliveries(t *testing.T) {
	rec := newRecorder()
	clk := &stepClock{now: time.Unix(1_700_000_000, 0)}
	svc := New(newMemStore(), &Options{Clock: clk, Observer: rec, MaxEnvelopeBytes: 1 << 10})
	c := ctx(t)
	group := transporttest.RandomGroupTopic()
	for i := range 3 {
		if _, err := svc.Publish(c, authed, []*backendpb.ClientEnvelope{transporttest.GroupMessage(group, []byte{byte(i)})}); err != nil {
			t.Fatal(err)
		}
	}
	_, priv, _ := ed25519.GenerateKey(nil)
	entry := transporttest.SealedEntry(priv, []byte("123456789012"), []byte("ct"))
	if _, err := svc.Publish(c, authed, []*backendpb.ClientEnvelope{entry}); err != nil {
		t.Fatal(err)
	}
	bad := transporttest.SealedEntry(priv, []byte("123456789012"), []byte("ct"))
	bad.GetSealedCommitLogEntry().Signature[0] ^= 1
	refusals := []struct {
		caller ports.Caller
		envs   []*backendpb.ClientEnvelope
		want   string
	}{
		{ports.Caller{}, []*backendpb.ClientEnvelope{transporttest.GroupMessage(group, []byte("x"))}, "group_messages/" + RefusedUnauthenticated},
		{authed, []*backendpb.ClientEnvelope{transporttest.GroupMessage(group, make([]byte, 2<<10))}, "group_messages/" + RefusedEnvelopeSize},
		{authed, []*backendpb.ClientEnvelope{transporttest.GroupMessage(group[:5], []byte("x"))}, "group_messages/" + RefusedTopic},
		{authed, []*backendpb.ClientEnvelope{transporttest.GroupMessage(group, []byte("x")), bad}, "commit_log/" + RefusedSignature},
		{authed, []*backendpb.ClientEnvelope{{TargetTopic: group}}, "group_messages/" + RefusedPayload},
	}
	for _, r := range refusals {
		if _, err := svc.Publish(c, r.caller, r.envs); err == nil {
			t.Fatalf("publish for %s was admitted", r.want)
		}
	}
	clk.now = clk.now.Add(1500 * time.Millisecond)
	sub, err := svc.Subscribe(c, authed, []ports.TopicCursor{{Topic: group}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for range 3 {
		if _, err := sub.Next(c); err != nil {
			t.Fatal(err)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if fmt.Sprint(rec.published) != fmt.Sprint(map[string]int{"group_messages": 3, "commit_log": 1}) {
		t.Fatalf("published = %v, want 3 group messages and 1 commit-log entry", rec.published)
	}
	for _, r := range refusals {
		if rec.refused[r.want] != 1 {
			t.Fatalf("refusals = %v, want one %s", rec.refused, r.want)
		}
	}
	if len(rec.refused) != len(refusals) {
		t.Fatalf("refusals = %v, want exactly %d kinds", rec.refused, len(refusals))
	}
	if len(rec.lags) != 3 || rec.lags[0] != 1500*time.Millisecond {
		t.Fatalf("delivery lags = %v, want 3 of 1.5s (the clock moved 1.5s after the publishes)", rec.lags)
	}
}

// COMP-140: TryNext hands out only what a subscription already read —
// the rest of its page, in order — and never reads or waits; the page's
// read budget goes back as the envelopes are taken.
func TestCOMP140_TryNextTakesOnlyThePageAtHand(t *testing.T) {
	store := newMemStore()
	svc := New(store, withClock(nil))
	c := ctx(t)
	topic := transporttest.RandomGroupTopic()
	var ids []uint64
	for i := range 3 {
		got, err := svc.Publish(c, authed, []*backendpb.ClientEnvelope{transporttest.GroupMessage(topic, []byte{byte(i)})})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got[0])
	}
	s, err := svc.Subscribe(c, authed, []ports.TopicCursor{{Topic: topic}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sub := s.(*subscription)
	if _, ok := sub.TryNext(); ok {
		t.Fatal("TryNext handed out an envelope before anything was read")
	}
	first, err := sub.Next(c)
	if err != nil {
		t.Fatal(err)
	}
	reads := store.rangeCalls()
	got := []uint64{first.GetSequenceId()}
	for {
		e, ok := sub.TryNext()
		if !ok {
			break
		}
		got = append(got, e.GetSequenceId())
	}
	if fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Fatalf("Next then TryNext = %v, want the page %v in order", got, ids)
	}
	if store.rangeCalls() != reads {
		t.Fatal("TryNext read the store")
	}
	// A publish after the page: TryNext does not read it, Next does.
	more, _ := svc.Publish(c, authed, []*backendpb.ClientEnvelope{transporttest.GroupMessage(topic, []byte("m"))})
	if _, ok := sub.TryNext(); ok {
		t.Fatal("TryNext read a new page")
	}
	if e, err := sub.Next(c); err != nil || e.GetSequenceId() != more[0] {
		t.Fatalf("Next after TryNext ran dry = %v, %v; want id %d", e, err, more[0])
	}
	if in := svc.ReadBudgetInUse(); in <= 0 {
		t.Fatalf("read budget in use = %d while the last envelope is out, want its size", in)
	}
	sub.Close()
	if in := svc.ReadBudgetInUse(); in != 0 {
		t.Fatalf("read budget in use after Close = %d, want 0", in)
	}
}
