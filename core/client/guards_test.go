package client_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/mlsfault"
)

// failingEngine fails the next Process with a local error, one that is
// none of the three message classes of ports.MLS.
type failingEngine struct {
	*mlsfault.Engine
	armed atomic.Bool
}

var errDisk = errors.New("engine storage failed")

func (f *failingEngine) Process(ctx context.Context, tx ports.Tx, groupID, msg []byte) (ports.Processed, error) {
	if f.armed.CompareAndSwap(true, false) {
		return ports.Processed{}, errDisk
	}
	return f.Engine.Process(ctx, tx, groupID, msg)
}

// A local engine failure is retried, never a lost message: the pass stops
// without moving the cursor past the envelope, and the next pass
// processes it (PROC-011: unresolved work is not an outcome).
func TestPROC011_LocalEngineFailureLosesNothing(t *testing.T) {
	w := world.New(t, "embedded")
	alice := w.Member("alice", world.Config{})
	var fe *failingEngine
	bob := w.Member("bob", world.Config{MLS: func(m ports.MLS) ports.MLS { fe = &failingEngine{Engine: m.(*mlsfault.Engine)}; return fe }})
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "ops", Members: []string{bob.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	world.SyncAll(alice, bob)
	before := cursorOf(t, bob, g.ID())
	if _, err := g.Send(w.Ctx, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	fe.armed.Store(true)
	if err := bob.Conv(g.ID()).Sync(w.Ctx); !errors.Is(err, errDisk) {
		t.Fatalf("bob's sync = %v, want the engine's failure", err)
	}
	if c := cursorOf(t, bob, g.ID()); c != before {
		t.Fatalf("bob's cursor moved from %d to %d over an envelope the engine did not process", before, c)
	}
	bob.Sync()
	if got := texts(t, bob, g.ID()); len(got) != 1 || got[0] != "kept" {
		t.Fatalf("bob reads %q after the retry, want [kept]", got)
	}
}

// COMP-185: an envelope at an id the store cannot hold — here a genuine
// message the delivery service withholds and serves at 2^64−1 — is
// skipped: no pass fails on it, and later messages are read.
func TestCOMP185_UnstorableIDSkipped(t *testing.T) {
	w, alice, bob, lie, g := lyingPair(t)
	if _, err := g.Send(w.Ctx, []byte("withheld")); err != nil {
		t.Fatal(err)
	}
	alice.Sync()
	hi, err := alice.Transport.HighestSequenceID(w.Ctx, groupTopicOf(g.ID()))
	if err != nil {
		t.Fatal(err)
	}
	lie.move(hi, math.MaxUint64)
	for _, text := range []string{"one", "two"} {
		if _, err := g.Send(w.Ctx, []byte(text)); err != nil {
			t.Fatal(err)
		}
		bob.Sync() // fails the test on a pass that fails
	}
	if got := texts(t, bob, g.ID()); len(got) != 2 || got[0] != "one" || got[1] != "two" {
		t.Fatalf("bob reads %q, want [one two]", got)
	}
}

// pendingOf reports whether m's engine holds a pending commit of the group.
func pendingOf(t *testing.T, m *world.Member, id []byte) bool {
	t.Helper()
	var held bool
	m.Tx(func(tx ports.Tx) error {
		_, err := m.Engine.PendingCommit(m.W.Ctx, tx, id)
		if errors.Is(err, ports.ErrNotFound) {
			return nil
		}
		held = err == nil
		return err
	})
	return held
}

// contractEngine holds the client to ports.MLS's order: a caller that
// merges another member's commit clears its own pending commit first.
type contractEngine struct {
	*mlsfault.Engine
	mu      sync.Mutex
	lastOwn map[string]bool
}

func (c *contractEngine) Process(ctx context.Context, tx ports.Tx, groupID, msg []byte) (ports.Processed, error) {
	p, err := c.Engine.Process(ctx, tx, groupID, msg)
	c.mu.Lock()
	c.lastOwn[string(groupID)] = err == nil && p.Own
	c.mu.Unlock()
	return p, err
}

func (c *contractEngine) MergeStaged(ctx context.Context, tx ports.Tx, groupID []byte) (ports.GroupView, error) {
	c.mu.Lock()
	own := c.lastOwn[string(groupID)]
	c.mu.Unlock()
	if _, err := c.Engine.PendingCommit(ctx, tx, groupID); err == nil && !own {
		return ports.GroupView{}, errors.New("contract: another member's commit merged over an uncleared pending commit")
	}
	return c.Engine.MergeStaged(ctx, tx, groupID)
}

// GMOD-018: a pending commit of this installation that another commit beat
// for its epoch can never merge, and one that read back invalid merges for
// nobody: the client clears it from the engine in both cases, before it
// merges the winner.
func TestGMOD018_LostAndRejectedPendingCommitsCleared(t *testing.T) {
	w := world.New(t, "embedded")
	alice := w.Member("alice", world.Config{})
	bob := w.Member("bob", world.Config{MLS: func(m ports.MLS) ports.MLS {
		return &contractEngine{Engine: m.(*mlsfault.Engine), lastOwn: map[string]bool{}}
	}})
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "ops", Members: []string{bob.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	world.SyncAll(alice, bob)

	// Lost: bob holds a pending key update when alice's commit arrives.
	bob.Tx(func(tx ports.Tx) error {
		_, err := bob.Engine.Commit(w.Ctx, tx, g.ID(), ports.CommitOptions{ForcePath: true})
		return err
	})
	if !pendingOf(t, bob, g.ID()) {
		t.Fatal("the engine holds no pending commit after Commit")
	}
	if err := g.UpdateKeys(w.Ctx); err != nil {
		t.Fatal(err)
	}
	bob.Sync()
	if pendingOf(t, bob, g.ID()) {
		t.Fatal("bob still holds his pending commit after another commit won its epoch")
	}

	// Rejected: bob, no admin, renames the group; he reads it back invalid.
	commitRaw(bob, g.ID(), func(v ports.GroupView) ports.CommitOptions {
		d, err := metadata.FromExtensions(v.Extensions)
		if err != nil {
			t.Fatal(err)
		}
		ext, err := d.Set(metadata.ComponentName, []byte("bob's")).Extension()
		if err != nil {
			t.Fatal(err)
		}
		return ports.CommitOptions{GroupContextExtensions: []ports.Extension{ext}}
	})
	bob.Sync()
	if pendingOf(t, bob, g.ID()) {
		t.Fatal("bob still holds his pending commit after reading it back invalid")
	}
	world.SyncAll(alice, bob)
	world.Agree(t, g.ID(), alice, bob)
}

// COMP-186: a group whose commit removed this installation is not read any
// more: its cursor stays at the removal and no pass queries its topic.
func TestCOMP186_InactiveGroupNotRead(t *testing.T) {
	w := world.New(t, "embedded")
	var lie *lying
	alice := w.Member("alice", world.Config{})
	carol := w.Member("carol", world.Config{})
	bob := w.Member("bob", world.Config{Transport: func(tr ports.Transport) ports.Transport { lie = newLying(tr); return lie }})
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "ops", Members: []string{bob.C.InboxID(), carol.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	world.SyncAll(alice, bob, carol)
	if err := g.RemoveMembers(w.Ctx, bob.C.InboxID()); err != nil {
		t.Fatal(err)
	}
	bob.Sync()
	if bob.Info(g.ID()).Active {
		t.Fatal("bob is active after his removal")
	}
	removal := cursorOf(t, bob, g.ID())
	if _, err := g.Send(w.Ctx, []byte("after bob")); err != nil {
		t.Fatal(err)
	}
	lie.queriesSince(groupTopicOf(g.ID()))
	if err := bob.Conv(g.ID()).Sync(w.Ctx); err != nil {
		t.Fatal(err)
	}
	bob.Sync()
	if n := lie.queriesSince(groupTopicOf(g.ID())); n != 0 {
		t.Fatalf("bob queried the topic of a group he left %d times", n)
	}
	if c := cursorOf(t, bob, g.ID()); c != removal {
		t.Fatalf("bob's cursor moved from the removal %d to %d", removal, c)
	}
}

// poisonOwn shows the client its own commits, read back, as changing an
// immutable component, which the shared policy refuses (COMP-012): the
// client's reading of its own refused commit is what is under test.
type poisonOwn struct {
	*mlsfault.Engine
	armed atomic.Bool
}

func (e *poisonOwn) Process(ctx context.Context, tx ports.Tx, groupID, msg []byte) (ports.Processed, error) {
	p, err := e.Engine.Process(ctx, tx, groupID, msg)
	if err != nil || !p.Own || p.Staged == nil || !e.armed.Load() {
		return p, err
	}
	d, err := metadata.FromExtensions(p.Staged.Extensions)
	if err != nil {
		return p, err
	}
	exts, err := d.Set(0xBFF0, []byte{1}).Apply(p.Staged.Extensions)
	if err != nil {
		return p, err
	}
	staged := *p.Staged
	staged.Extensions = exts
	p.Staged = &staged
	return p, nil
}

// GMOD-021: an own commit that the policy refuses on reading it back
// ends the commit with ErrNotPermitted: the intent is marked rejected, the
// engine's pending commit is cleared, nothing merges, and the next commit
// goes through.
func TestGMOD021_OwnRejectedCommitEndsNotPermitted(t *testing.T) {
	w := world.New(t, "embedded")
	var pe *poisonOwn
	alice := w.Member("alice", world.Config{MLS: func(m ports.MLS) ports.MLS { pe = &poisonOwn{Engine: m.(*mlsfault.Engine)}; return pe }})
	bob := w.Member("bob", world.Config{})
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "ops", Members: []string{bob.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	world.SyncAll(alice, bob)
	before := alice.Info(g.ID())
	pe.armed.Store(true)
	if err := g.SetName(w.Ctx, "refused"); !errors.Is(err, client.ErrNotPermitted) {
		t.Fatalf("an own commit read back refused = %v, want ErrNotPermitted", err)
	}
	pe.armed.Store(false)
	if pendingOf(t, alice, g.ID()) {
		t.Fatal("alice still holds the refused commit as pending")
	}
	if info := alice.Info(g.ID()); info.Epoch != before.Epoch || info.Name != before.Name {
		t.Fatalf("alice moved on with her refused commit: %+v", info)
	}
	// Only alice's view was poisoned: her next commit, built on the epoch
	// she kept, goes through for her.
	if err := g.SetName(w.Ctx, "next"); err != nil {
		t.Fatalf("the next commit after a refused one: %v", err)
	}
	if info := alice.Info(g.ID()); info.Epoch != before.Epoch+1 || info.Name != "next" {
		t.Fatalf("alice after her next commit: %+v", info)
	}
}
