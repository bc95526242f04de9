package client_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// callCounter counts a transport's calls by method, and the Query calls
// by topic kind; it keeps the batched highest-id read.
type callCounter struct {
	ports.Transport
	mu      sync.Mutex
	calls   map[string]int
	queries map[string]int // by topic
}

func (c *callCounter) count(method string, topic []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[method]++
	if topic != nil {
		c.queries[string(topic)]++
	}
}

func (c *callCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls, c.queries = map[string]int{}, map[string]int{}
}

// groupQueries returns the Query calls on group-message topics, by topic.
func (c *callCounter) groupQueries() map[string]int { return c.queriesOf(ports.TopicGroupMessages) }

// queriesOf returns the Query calls on topics of kind, by topic.
func (c *callCounter) queriesOf(kind ports.TopicKind) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for t, n := range c.queries {
		if t[0] == byte(kind) {
			out[t] = n
		}
	}
	return out
}

func (c *callCounter) Query(ctx context.Context, topic []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error) {
	c.count("Query", topic)
	return c.Transport.Query(ctx, topic, after, limit)
}

func (c *callCounter) HighestSequenceID(ctx context.Context, topic []byte) (uint64, error) {
	c.count("HighestSequenceID", nil)
	return c.Transport.HighestSequenceID(ctx, topic)
}

func (c *callCounter) HighestSequenceIDs(ctx context.Context, topics [][]byte) ([]uint64, error) {
	c.count("HighestSequenceIDs", nil)
	return c.Transport.(ports.HighestReader).HighestSequenceIDs(ctx, topics)
}

// TestCOMP280_SyncReadsOnlyMovedGroups: once a member's groups are
// processed, a sync reads no group topic and no commit log (COMP-282): it
// learns that none moved from batched highest-id reads. After a message
// in one group it reads that group's topic and no other; after a commit
// in another, that group's topic and commit log and no other log.
func TestCOMP280_SyncReadsOnlyMovedGroups(t *testing.T) {
	world.Each(t, []string{"embedded", "sqlite"}, testSyncReadsOnlyMoved)
}

func testSyncReadsOnlyMoved(t *testing.T, w *world.World) {
	const groups = 5
	alice := w.Member("alice", world.Config{})
	counter := &callCounter{calls: map[string]int{}, queries: map[string]int{}}
	bob := w.Member("bob", world.Config{Transport: func(tr ports.Transport) ports.Transport {
		if _, ok := tr.(ports.HighestReader); !ok {
			t.Fatalf("the %s transport has no batched highest-id read", w.Mode)
		}
		counter.Transport = tr
		return counter
	}})
	var ids [][]byte
	for i := range groups {
		g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: fmt.Sprint("g", i), Members: []string{bob.C.InboxID()}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, g.ID())
	}
	bob.Sync()
	for _, id := range ids {
		for _, m := range []*world.Member{alice, bob} {
			if err := m.Conv(id).SetConsent(w.Ctx, ports.ConsentAllowed); err != nil {
				t.Fatal(err)
			}
		}
	}
	world.SyncAll(alice, bob)
	counter.reset()
	bob.Sync()
	if q := counter.groupQueries(); len(q) != 0 {
		t.Fatalf("an idle sync read %d group topics, want none", len(q))
	}
	if q := counter.queriesOf(ports.TopicCommitLog); len(q) != 0 {
		t.Fatalf("an idle sync read %d commit logs, want none", len(q))
	}
	if counter.calls["HighestSequenceIDs"] == 0 {
		t.Fatal("an idle sync made no batched highest-id read")
	}
	if _, err := alice.Conv(ids[2]).Send(w.Ctx, []byte("moved")); err != nil {
		t.Fatal(err)
	}
	counter.reset()
	bob.Sync()
	q := counter.groupQueries()
	for topic := range q {
		if !bytes.Equal([]byte(topic)[1:], ids[2]) {
			t.Errorf("the sync read group %x, which did not move", []byte(topic)[1:])
		}
	}
	if len(q) == 0 {
		t.Error("the sync did not read the group that moved")
	}
	if got := texts(t, bob, ids[2]); len(got) != 1 || got[0] != "moved" {
		t.Fatalf("bob holds %q in the moved group, want [moved]", got)
	}
	if err := alice.Conv(ids[4]).SetName(w.Ctx, "renamed"); err != nil {
		t.Fatal(err)
	}
	alice.Sync() // publishes alice's commit-log entry
	counter.reset()
	bob.Sync()
	for topic := range counter.groupQueries() {
		if !bytes.Equal([]byte(topic)[1:], ids[4]) {
			t.Errorf("the sync after a commit read group %x, which did not move", []byte(topic)[1:])
		}
	}
	if q := counter.queriesOf(ports.TopicCommitLog); len(q) != 1 {
		t.Errorf("the sync after a commit in one group read %d commit logs, want 1", len(q))
	}
	if got := bob.Info(ids[4]).Name; got != "renamed" {
		t.Errorf("bob's group is named %q, want renamed", got)
	}
}
