package hostile_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
)

// liftIdentity answers the newest sequence id of every identity topic far
// above the topic's end (API-244 lied upward), and is honest otherwise.
type liftIdentity struct{ ports.Transport }

func (l liftIdentity) HighestSequenceID(ctx context.Context, topic []byte) (uint64, error) {
	seq, err := l.Transport.HighestSequenceID(ctx, topic)
	if err == nil && len(topic) > 0 && topic[0] == byte(ports.TopicIdentityUpdates) {
		seq += 1 << 40
	}
	return seq, err
}

// COMP-274: an add whose identity lookups meet a newest id lied upward
// neither stalls for the resolver's retry window nor fails: alice's clock
// never moves, so a wait on it would last until the test's deadline, and
// the add resolves bob at his newest verified update at once.
func TestCOMP274_AddUnderANewestIDLiedUpward(t *testing.T) {
	t.Parallel()
	w := world.NewFor(t, "embedded", time.Minute)
	clk := clock.NewFake(time.Now().UTC())
	alice := w.Member("alice", world.Config{Clock: clk,
		Transport: func(tr ports.Transport) ports.Transport { return liftIdentity{tr} }})
	bob := w.Member("bob", world.Config{})
	cv, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "g"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(w.Ctx, 20*time.Second)
	defer cancel()
	if err := cv.AddMembers(ctx, bob.C.InboxID()); err != nil {
		t.Fatalf("add under a newest id lied upward: %v", err)
	}
	ms, err := cv.Members(w.Ctx)
	if err != nil || !slices.ContainsFunc(ms, func(m client.Member) bool { return m.InboxID == bob.C.InboxID() }) {
		t.Fatalf("bob not a member after the add: %v, %v", ms, err)
	}
	if err := bob.C.SyncAll(w.Ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.C.Conversation(w.Ctx, cv.ID()); err != nil {
		t.Fatalf("bob did not join (the membership names his identity at a verified update): %v", err)
	}
}
