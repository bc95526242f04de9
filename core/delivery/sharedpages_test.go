package delivery

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/transporttest"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// leftStore is a memStore whose leave records say that one installation
// left every group through a sequence id.
type leftStore struct {
	*memStore
	mu      sync.Mutex
	key     []byte
	through uint64
}

func (l *leftStore) RecordLeave(context.Context, ports.LeaveRecord) error { return nil }
func (l *leftStore) ForgetLeave(context.Context, []byte, string) error    { return nil }
func (l *leftStore) LeftInboxes(context.Context, []byte) ([]string, error) {
	return nil, nil
}
func (l *leftStore) LeftThrough(_ context.Context, _, key []byte) (uint64, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.through, l.key != nil && bytes.Equal(key, l.key), nil
}

var _ ports.LeaveStore = (*leftStore)(nil)

// COMP-555: subscriptions woken by one commit at the same cursor read
// the page once between them, and each keeps its own rules: every
// subscriber gets its own copy of the envelope from Next, and an
// installation that left the group gets nothing above its leave record
// from the same shared page.
func TestCOMP555_SubscribersShareOneReadAndKeepTheirOwnRules(t *testing.T) {
	store := &leftStore{memStore: newMemStore()}
	svc := New(store, withClock(nil))
	topic := transporttest.RandomGroupTopic()
	first, err := svc.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{transporttest.GroupMessage(topic, []byte("before"))})
	if err != nil {
		t.Fatal(err)
	}
	const readers = 20
	var subs []ports.Subscription
	for i := 0; i <= readers; i++ { // the last one leaves
		caller := ports.Caller{InstallationKey: bytes.Repeat([]byte{byte(i + 1)}, 32)}
		sub, err := svc.Subscribe(ctx(t), caller, []ports.TopicCursor{{Topic: topic, After: first[0]}})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		subs = append(subs, sub)
	}
	// Leave records are read when commit acceptance is on (leave.go).
	svc.opts.PublicGroups = &fakePublic{}
	store.mu.Lock()
	store.key, store.through = bytes.Repeat([]byte{readers + 1}, 32), first[0]
	store.mu.Unlock()
	payload := bytes.Repeat([]byte{5}, 4096)
	ids, err := svc.Publish(ctx(t), authed, []*backendpb.ClientEnvelope{transporttest.GroupMessage(topic, payload)})
	if err != nil {
		t.Fatal(err)
	}
	reads := store.rangeCalls()
	got := make([]*backendpb.OriginatorEnvelope, readers)
	errs := make([]error, readers)
	var wg sync.WaitGroup
	for i := 0; i < readers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = subs[i].Next(ctx(t))
		}()
	}
	wg.Wait()
	for i := 0; i < readers; i++ {
		if errs[i] != nil || got[i].GetSequenceId() != ids[0] || !bytes.Equal(got[i].GetEnvelope().GetGroupMessage(), payload) {
			t.Fatalf("subscriber %d: %v, %v; want envelope %d", i, got[i], errs[i], ids[0])
		}
		if i > 0 && got[i] == got[0] {
			t.Fatal("two subscribers were handed the same envelope from Next")
		}
	}
	if n := store.rangeCalls() - reads; n != 1 {
		t.Fatalf("%d subscribers at one cursor read the store %d times, want once", readers, n)
	}
	// The subscriber that left reads the same page (still shared: the
	// others hold it) and gets nothing of it.
	short, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond)
	defer cancel()
	if e, err := subs[readers].Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("an installation that left through %d got %v, %v", first[0], e, err)
	}
	if n := store.rangeCalls() - reads; n != 1 {
		t.Fatalf("the store was read %d times, want once", n)
	}
	for _, s := range subs {
		s.Close()
	}
	if in := svc.ReadBudgetInUse(); in != 0 {
		t.Fatalf("read budget in use %d after every subscription closed", in)
	}
}
