package delivery

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// COMP-404: the service keeps the states it read or wrote, yet a cached
// state behind the database — another process sharing it stored the
// group's next commit — neither refuses the commit the database's state
// accepts nor lets a commit of the stale epoch in: the first is
// validated again from the database, the second fails the transaction's
// expectation and is validated again, refused for its epoch.
func TestCOMP404_StaleCachedStateRevalidated(t *testing.T) {
	ctx := context.Background()
	st := newStateStore()
	svc := New(st, withClock(&Options{PublicGroups: &fakePublic{}}))
	caller := ports.Caller{InstallationKey: bytes.Repeat([]byte{7}, 32)}
	group := bytes.Repeat([]byte{9}, 16)
	publish := func(envs ...*backendpb.ClientEnvelope) ([]uint64, error) { return svc.Publish(ctx, caller, envs) }
	if _, err := publish(groupEnv(ports.TopicGroupInfo, group, fakeGroupInfo(group, 0))); err != nil {
		t.Fatal(err)
	}
	if _, err := publish(groupEnv(ports.TopicGroupMessages, group, fakeCommit(group, 0, 0))); err != nil {
		t.Fatal(err)
	}
	// Another process stores the commit of epoch 1 behind this service.
	other := New(st, withClock(&Options{PublicGroups: &fakePublic{}}))
	if _, err := other.Publish(ctx, caller, []*backendpb.ClientEnvelope{groupEnv(ports.TopicGroupMessages, group, fakeCommit(group, 1, 0))}); err != nil {
		t.Fatal(err)
	}
	// A stale epoch's commit: refused for its epoch, stored nowhere.
	before, _ := st.Highest(ctx, append([]byte{0}, group...))
	if _, err := publish(groupEnv(ports.TopicGroupMessages, group, fakeCommit(group, 1, 3))); !errors.Is(err, ports.ErrEpochConflict) {
		t.Fatalf("a commit of the epoch the database left: %v, want ErrEpochConflict", err)
	}
	if n, _ := st.Highest(ctx, append([]byte{0}, group...)); n != before {
		t.Fatal("the stale commit was stored")
	}
	// The current epoch's commit: accepted although this service cached
	// epoch 1 before the refusal dropped it; again after another advance.
	if _, err := other.Publish(ctx, caller, []*backendpb.ClientEnvelope{groupEnv(ports.TopicGroupMessages, group, fakeCommit(group, 2, 0))}); err != nil {
		t.Fatal(err)
	}
	if _, err := publish(groupEnv(ports.TopicGroupMessages, group, fakeCommit(group, 3, 0))); err != nil {
		t.Fatalf("a commit of the database's epoch: %v", err)
	}
	if s, _ := st.PublicState(ctx, group); s.Epoch != 4 {
		t.Fatalf("state at epoch %d, want 4", s.Epoch)
	}
}
