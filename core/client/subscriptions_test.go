package client_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
)

// subscribeCounter counts a transport's subscriptions and their refusals.
type subscribeCounter struct {
	ports.Transport
	opened, refused atomic.Int64
	lastErr         atomic.Value
}

func (s *subscribeCounter) Subscribe(ctx context.Context, cursors []ports.TopicCursor) (ports.Subscription, error) {
	sub, err := s.Transport.Subscribe(ctx, cursors)
	if err != nil {
		s.refused.Add(1)
		s.lastErr.Store(err.Error())
		return nil, err
	}
	s.opened.Add(1)
	return sub, nil
}

// TestCOMP277_ClientAboveTopicLimitSubscribes: a client that follows more
// topics than one subscription may name (a regroupd process whose limit
// is 4 topics; the member follows its welcome topic and 6 group topics,
// and the commit-log topics of those whose consent it allowed) subscribes
// to all of them, with no refusal, and receives every group's message through its
// subscriptions (its timed sync is an hour away).
func TestCOMP277_ClientAboveTopicLimitSubscribes(t *testing.T) {
	for _, mode := range world.Networked {
		t.Run(mode+"/limit", func(t *testing.T) {
			w := world.NewWithFlags(t, mode, 2*time.Minute, "-max-cursors", "4")
			testAboveTopicLimit(t, w)
		})
	}
}

func testAboveTopicLimit(t *testing.T, w *world.World) {
	const groups = 6
	alice := w.Member("alice", world.Config{})
	counter := &subscribeCounter{}
	bob := w.Member("bob", world.Config{
		Options:   &client.Options{SubscriptionTopics: 4, SyncInterval: time.Hour},
		Transport: func(tr ports.Transport) ports.Transport { counter.Transport = tr; return counter },
	})
	var ids [][]byte
	for i := range groups {
		g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: fmt.Sprint("g", i), Members: []string{bob.C.InboxID()}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, g.ID())
	}
	bob.Sync()
	if err := bob.C.Start(w.Ctx); err != nil {
		t.Fatal(err)
	}
	// At least 1 welcome topic + 6 group topics: two subscriptions of at
	// most 4 topics.
	waitUntil(t, "bob's subscriptions", func() bool { return counter.opened.Load() >= 2 || counter.refused.Load() > 0 })
	for i, id := range ids {
		if _, err := alice.Conv(id).Send(w.Ctx, []byte(fmt.Sprint("m", i))); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "every message at bob", func() bool {
		for i, id := range ids {
			if got := texts(t, bob, id); len(got) != 1 || got[0] != fmt.Sprint("m", i) {
				return false
			}
		}
		return true
	})
	if n := counter.refused.Load(); n > 0 {
		t.Fatalf("%d subscriptions refused, last: %v", n, counter.lastErr.Load())
	}
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
