package client_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"google.golang.org/protobuf/proto"
)

// lying is a delivery service that serves, besides what it holds,
// envelopes it placed at sequence ids of its own choosing.
type lying struct {
	ports.Transport
	mu      sync.Mutex
	placed  map[string][]*backendpb.OriginatorEnvelope
	served  map[string]int // envelopes served per topic
	queries map[string]int // queries per topic
	// moved serves the real envelope at a key's id at the value's instead.
	moved map[uint64]uint64
}

func newLying(inner ports.Transport) *lying {
	return &lying{Transport: inner, placed: map[string][]*backendpb.OriginatorEnvelope{}, served: map[string]int{}}
}

// place serves payload on topic at seq from now on.
func (l *lying) place(topic []byte, seq uint64, payload []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	env := &backendpb.OriginatorEnvelope{SequenceId: seq, Envelope: &backendpb.ClientEnvelope{TargetTopic: topic,
		Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: payload}}}
	l.placed[string(topic)] = append(l.placed[string(topic)], env)
}

func (l *lying) Query(ctx context.Context, topic []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error) {
	envs, err := l.Transport.Query(ctx, topic, after, limit)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	if l.queries == nil {
		l.queries = map[string]int{}
	}
	l.queries[string(topic)]++
	for i, e := range envs {
		if to, ok := l.moved[e.GetSequenceId()]; ok {
			c := proto.Clone(e).(*backendpb.OriginatorEnvelope)
			c.SequenceId = to
			envs[i] = c
		}
	}
	for _, p := range l.placed[string(topic)] {
		if p.GetSequenceId() > after {
			envs = append(envs, p)
		}
	}
	l.mu.Unlock()
	sort.Slice(envs, func(i, j int) bool { return envs[i].GetSequenceId() < envs[j].GetSequenceId() })
	if limit > 0 && len(envs) > limit {
		envs = envs[:limit]
	}
	l.mu.Lock()
	l.served[string(topic)] += len(envs)
	l.mu.Unlock()
	return envs, nil
}

// move serves the real envelope at id from at id to from now on.
func (l *lying) move(from, to uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.moved == nil {
		l.moved = map[uint64]uint64{}
	}
	l.moved[from] = to
}

// junkCommit is a PublicMessage whose header names a commit of the group
// at epoch, followed by bytes no engine accepts.
func junkCommit(groupID []byte, epoch uint64) []byte {
	b := []byte{0, 1, 0, 1, byte(len(groupID))}
	b = append(b, groupID...)
	b = binary.BigEndian.AppendUint64(b, epoch)
	b = append(b, 1, 0, 0, 0, 0) // sender: member 0
	b = append(b, 0)             // authenticated_data
	b = append(b, 3)             // content type: commit
	return append(b, bytes.Repeat([]byte{0xee}, 40)...)
}

func groupTopicOf(id []byte) []byte { return append([]byte{byte(ports.TopicGroupMessages)}, id...) }

func cursorOf(t *testing.T, m *world.Member, id []byte) uint64 {
	t.Helper()
	var g ports.Group
	m.Tx(func(tx ports.Tx) error {
		var err error
		g, err = tx.Groups().Get(m.W.Ctx, id)
		return err
	})
	return g.Cursor
}

func localEntries(t *testing.T, m *world.Member, id []byte) []ports.LocalCommitLogEntry {
	t.Helper()
	var es []ports.LocalCommitLogEntry
	m.Tx(func(tx ports.Tx) error {
		var err error
		es, err = tx.LocalCommitLog().List(m.W.Ctx, id, 0, 0)
		return err
	})
	return es
}

// TestCOMP240_JunkAtAnExtremeIDCutsNobodyOff: a delivery service places a
// commit no engine accepts, a payload that is no MLS message, and a copy of
// the member's own message, at ids near 2^63−1 on a group's topic. The member's stored cursor does not
// follow them: the honest messages and commits published after them, with
// lower ids, are read, the member agrees with the group, and no refusal is
// recorded for envelopes that nothing authenticated follows.
func TestCOMP240_JunkAtAnExtremeIDCutsNobodyOff(t *testing.T) {
	w, alice, bob, lie, g := lyingPair(t)
	world.Agree(t, g.ID(), alice, bob)
	info := bob.Info(g.ID())
	lie.place(groupTopicOf(g.ID()), math.MaxInt64-1, junkCommit(g.ID(), info.Epoch))
	// bob's own message, read back at its id, and replayed near 2^63−1.
	if _, err := bob.Conv(g.ID()).Send(w.Ctx, []byte("mine")); err != nil {
		t.Fatal(err)
	}
	bob.Sync()
	ownSeq := cursorOf(t, bob, g.ID())
	envs, err := bob.Transport.Query(w.Ctx, groupTopicOf(g.ID()), ownSeq-1, 1)
	if err != nil || len(envs) != 1 {
		t.Fatalf("bob's message on the topic: %v %v", envs, err)
	}
	lie.place(groupTopicOf(g.ID()), math.MaxInt64-2, envs[0].GetEnvelope().GetGroupMessage())
	lie.place(groupTopicOf(g.ID()), math.MaxInt64, []byte("not an MLS message"))
	before := len(localEntries(t, bob, g.ID()))
	bob.Sync()
	if c := cursorOf(t, bob, g.ID()); c >= math.MaxInt64-1 {
		t.Fatalf("bob's cursor moved to %d, over envelopes it could not authenticate", c)
	}
	for i, text := range []string{"one", "two"} {
		if _, err := g.Send(w.Ctx, []byte(text)); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := g.SetName(w.Ctx, "ops-2"); err != nil {
				t.Fatal(err)
			}
		}
	}
	world.SyncAll(alice, bob)
	world.Agree(t, g.ID(), alice, bob)
	if got := texts(t, bob, g.ID()); len(got) != 3 || got[1] != "one" || got[2] != "two" {
		t.Fatalf("bob reads %q after the junk, want [mine one two]", got)
	}
	if bob.Info(g.ID()).Name != "ops-2" {
		t.Fatalf("bob missed the rename published after the junk")
	}
	for _, e := range localEntries(t, bob, g.ID())[before:] {
		if e.CommitResult != ports.CommitResultApplied {
			t.Fatalf("bob recorded %v for commit %d: a refusal with nothing authenticated after it is not terminal", e.CommitResult, e.CommitSequenceID)
		}
	}
}

// TestFORK002_RefusalRecordedOnceCovered: a commit the engine refuses
// between two honest envelopes is recorded as a terminal refusal
// (FORK-002) once the honest envelope after it is processed, and the
// cursor moves over it; at the end of the topic it is held, not recorded.
func TestFORK002_RefusalRecordedOnceCovered(t *testing.T) {
	w, alice, bob, lie, g := lyingPair(t)
	placedAt := idElsewhere(t, alice)
	if placedAt <= cursorOf(t, bob, g.ID()) {
		t.Fatalf("the id taken elsewhere, %d, is not above bob's cursor", placedAt)
	}
	lie.place(groupTopicOf(g.ID()), placedAt, junkCommit(g.ID(), bob.Info(g.ID()).Epoch))
	bob.Sync()
	if c := cursorOf(t, bob, g.ID()); c >= placedAt {
		t.Fatalf("bob's cursor %d moved over the refused commit at %d with nothing after it", c, placedAt)
	}
	for _, e := range localEntries(t, bob, g.ID()) {
		if e.CommitSequenceID == placedAt {
			t.Fatalf("bob recorded the refused commit at %d before anything authenticated followed it", placedAt)
		}
	}
	if _, err := g.Send(w.Ctx, []byte("after")); err != nil {
		t.Fatal(err)
	}
	bob.Sync()
	var found bool
	for _, e := range localEntries(t, bob, g.ID()) {
		if e.CommitSequenceID == placedAt {
			found = e.CommitResult != ports.CommitResultApplied
		}
	}
	if !found {
		t.Fatalf("the refused commit at %d is not recorded once an honest message follows it", placedAt)
	}
	if c := cursorOf(t, bob, g.ID()); c <= placedAt {
		t.Fatalf("bob's cursor %d did not move over the refused commit at %d", c, placedAt)
	}
}

// servedSince returns the envelopes served on topic since the last call.
func (l *lying) servedSince(topic []byte) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.served[string(topic)]
	l.served[string(topic)] = 0
	return n
}

// TestCOMP240_JunkFloodCostsBoundedPasses: 3,000 envelopes that are no MLS
// message and 300 commits no engine accepts, placed at ids above every
// honest one. Each sync reads every honest message published meanwhile
// (they come first, in the page read from the stored cursor), and no sync
// is served more than one page of junk it read before plus its budget of
// new junk, so the flood is read through in a bounded number of syncs.
func TestCOMP240_JunkFloodCostsBoundedPasses(t *testing.T) {
	w, _, bob, lie, g := lyingPair(t)
	topic := groupTopicOf(g.ID())
	epoch := bob.Info(g.ID()).Epoch
	const base = uint64(1) << 62
	for i := uint64(0); i < 3300; i++ {
		payload := []byte("junk")
		if i%11 == 0 {
			payload = junkCommit(g.ID(), epoch)
		}
		lie.place(topic, base+i, payload)
	}
	lie.servedSince(topic)
	const pageSize, budget = 100, 512 // the processor's page and readpos.Budget
	var want []string
	for round := 0; round < 10; round++ {
		text := string(rune('a' + round))
		if _, err := g.Send(w.Ctx, []byte(text)); err != nil {
			t.Fatal(err)
		}
		want = append(want, text)
		bob.Sync()
		if got := texts(t, bob, g.ID()); len(got) != len(want) {
			t.Fatalf("round %d: bob reads %q, want %q", round, got, want)
		}
		// A pass reads its probe page, then up to its budget of new junk
		// and the page that crosses it.
		n := lie.servedSince(topic)
		if n > 2*pageSize+budget {
			t.Fatalf("round %d: one sync was served %d envelopes of the group topic", round, n)
		}
		// Once the flood is read through, a sync re-reads only its probe.
		if round == 9 && n > pageSize+1 {
			t.Fatalf("after the flood was read through, a sync was served %d envelopes", n)
		}
	}
	if c := cursorOf(t, bob, g.ID()); c >= base {
		t.Fatalf("bob's cursor moved to %d, into the junk", c)
	}
}

// TestFORK063_RemovedFloorIsNoFloor: a commit that removes the minimum
// protocol version component leaves every member's stored floor empty,
// not the value before it, so the next readd raises it again (FORK-063).
func TestFORK063_RemovedFloorIsNoFloor(t *testing.T) {
	w := world.New(t, "embedded")
	alice := w.Member("alice", world.Config{})
	bob := w.Member("bob", world.Config{})
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "ops", Members: []string{bob.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	world.SyncAll(alice, bob)
	if v := bob.Info(g.ID()).MinProtocolVersion; v == "" {
		t.Fatal("the group starts without a floor; the case needs one")
	}
	commitRaw(alice, g.ID(), func(v ports.GroupView) ports.CommitOptions {
		d, err := metadata.FromExtensions(v.Extensions)
		if err != nil {
			t.Fatal(err)
		}
		var kept metadata.Dictionary
		for _, c := range d.Components {
			if c.ID != metadata.ComponentMinProtocol {
				kept = kept.Set(c.ID, c.Data)
			}
		}
		exts, err := kept.Apply(v.Extensions)
		if err != nil {
			t.Fatal(err)
		}
		return ports.CommitOptions{GroupContextExtensions: exts}
	})
	world.SyncAll(alice, bob)
	world.Agree(t, g.ID(), alice, bob)
	for _, m := range []*world.Member{alice, bob} {
		if v := m.Info(g.ID()).MinProtocolVersion; v != "" {
			t.Errorf("%s still stores the removed floor %q", m.Name, v)
		}
	}
}

// queriesSince returns the queries of topic since the last call.
func (l *lying) queriesSince(topic []byte) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.queries[string(topic)]
	l.queries[string(topic)] = 0
	return n
}

// TestJOIN066_MissedMessageReported: an application message after the
// join anchor that the client cannot decrypt is reported as missed, once
// an authenticated message after it shows it stands in the group's
// sequence; envelopes at or below the anchor are never read, so never
// reported.
func TestJOIN066_MissedMessageReported(t *testing.T) {
	w, alice, bob, lie, g := lyingPair(t)
	anchor := bob.Info(g.ID()).Cursor
	at := idElsewhere(t, alice)
	// A PrivateMessage of the group's epoch that nobody can decrypt, and a
	// copy of an envelope from before bob's anchor served again.
	junk := []byte{0, 1, 0, 2, byte(len(g.ID()))}
	junk = append(junk, g.ID()...)
	junk = binary.BigEndian.AppendUint64(junk, bob.Info(g.ID()).Epoch)
	junk = append(junk, 1)
	junk = append(junk, bytes.Repeat([]byte{0xab}, 64)...)
	lie.place(groupTopicOf(g.ID()), at, junk)
	lie.place(groupTopicOf(g.ID()), anchor-1, junk)
	drainEventsOf(bob)
	if _, err := g.Send(w.Ctx, []byte("after")); err != nil {
		t.Fatal(err)
	}
	bob.Sync()
	var missed []uint64
	// The first report may take a while to be handed over on a loaded
	// machine; any further one follows it at once.
	deadline := time.After(20 * time.Second)
	for len(missed) == 0 {
		select {
		case ev := <-bob.C.Events():
			if m, ok := ev.(client.MessageMissedEvent); ok {
				missed = append(missed, m.SequenceID)
			}
		case <-deadline:
			t.Fatalf("bob reported no missed message (anchor %d)", anchor)
		}
	}
	for _, ev := range drainEventsOf(bob) {
		if m, ok := ev.(client.MessageMissedEvent); ok {
			missed = append(missed, m.SequenceID)
		}
	}
	if len(missed) != 1 || missed[0] != at {
		t.Fatalf("bob reported missed %v; want exactly the undecryptable message at %d (anchor %d)", missed, at, anchor)
	}
}

// drainEventsOf returns the events m's client queued so far.
func drainEventsOf(m *world.Member) []client.Event {
	var out []client.Event
	for {
		select {
		case ev := <-m.C.Events():
			out = append(out, ev)
			continue
		case <-time.After(100 * time.Millisecond):
		}
		return out
	}
}

// idElsewhere returns an id the delivery service just handed out on
// another group's topic. Ids are shared by every topic (COMP-041), so a
// group's topic has no envelope there: junk placed at it stands between
// two honest envelopes of the group.
func idElsewhere(t *testing.T, m *world.Member) uint64 {
	t.Helper()
	other, err := m.C.CreateGroup(m.W.Ctx, client.GroupOptions{Name: "elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Send(m.W.Ctx, []byte("elsewhere")); err != nil {
		t.Fatal(err)
	}
	m.Sync()
	id, err := m.Transport.HighestSequenceID(m.W.Ctx, groupTopicOf(other.ID()))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// lyingPair starts alice and bob, bob behind a lying delivery service, in
// a group alice created with bob, both synced.
func lyingPair(t *testing.T) (*world.World, *world.Member, *world.Member, *lying, *client.Conversation) {
	t.Helper()
	w := world.New(t, "embedded")
	var lie *lying
	alice := w.Member("alice", world.Config{})
	bob := w.Member("bob", world.Config{Transport: func(tr ports.Transport) ports.Transport { lie = newLying(tr); return lie }})
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "ops", Members: []string{bob.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	world.SyncAll(alice, bob)
	return w, alice, bob, lie, g
}
