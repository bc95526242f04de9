package hostile_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/recovery"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/mlsfault"
)

// A scenario drives members of n through one of the client's end-to-end
// flows and fails the test when an invariant it states does not hold.
type scenario struct {
	name string
	// invariant is what the scenario checks, for the test log and
	// docs/reliability.md.
	invariant string
	run       func(n *net)
}

var scenarios = []scenario{
	{"group", "every member converges to the same epoch and epoch authenticator, holds every message exactly once, " +
		"has every own message read back, and is not forked", runGroup},
	{"dm", "both sides find the same DM, converge, hold every message exactly once and read not forked", runDM},
	{"readd", "a removed and re-added member is active again at the group's epoch and keeps the messages it held (JOIN-044)", runReadd},
	{"fork-repair", "a forked member is readded exactly once (FORK-064), then every member converges and reads not forked", runForkRepair},
	{"key-rotation", "a member whose key package was used rotates it (JOIN-016), destroys the old one only after its delay, " +
		"and is added to a new group with the new one", runKeyRotation},
	{"workers", "with the workers running, every message reaches the other member exactly once through the subscription " +
		"or the periodic pass", runWorkers},
}

func send(n *net, m *world.Member, id []byte, text string) string {
	n.t.Helper()
	_, err := m.Conv(id).Send(n.w.Ctx, []byte(text))
	n.ok(m, "send", err)
	return text
}

// update has m commit a key update, repeated while it fails: an
// unavailable service may have stopped it before it was built, and a
// second update is harmless.
func update(n *net, m *world.Member, id []byte) {
	n.t.Helper()
	var err error
	for i := 0; i < 20; i++ {
		if err = m.Conv(id).UpdateKeys(n.w.Ctx); err == nil {
			return
		}
	}
	n.t.Fatalf("%s: update keys: %v", m.Name, err)
}

func inboxes(ms ...*world.Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.C.InboxID())
	}
	return out
}

func create(n *net, creator *world.Member, ms ...*world.Member) []byte {
	n.t.Helper()
	cv, err := creator.C.CreateGroup(n.w.Ctx, client.GroupOptions{Name: "g"})
	if err != nil {
		n.t.Fatalf("%s: create group: %v", creator.Name, err)
	}
	add(n, creator, cv.ID(), ms...)
	return cv.ID()
}

// add has m add the members' inboxes until m's view holds them all.
func add(n *net, m *world.Member, id []byte, ms ...*world.Member) {
	n.t.Helper()
	n.membership(m, id, "add", func(cv *client.Conversation) error { return cv.AddMembers(n.w.Ctx, inboxes(ms...)...) },
		func(held []client.Member) bool {
			for _, want := range ms {
				if !slices.ContainsFunc(held, func(h client.Member) bool { return h.InboxID == want.C.InboxID() }) {
					return false
				}
			}
			return true
		})
}

func runGroup(n *net) {
	a, b, c := n.member("alice", nil, nil), n.member("bob", nil, nil), n.member("carol", nil, nil)
	all := []*world.Member{a, b, c}
	id := create(n, a, b, c)
	n.settle("join", func() error { return agree(id, all...) }, all...)
	allowed(n, id, all...)
	var want []string
	for _, m := range all {
		want = append(want, send(n, m, id, "from "+m.Name))
	}
	update(n, a, id)
	want = append(want, send(n, b, id, "after the update"))
	n.settle("converge", func() error {
		return errors.Join(agree(id, all...), holds(id, want, all...), confirmed(id, all...), notForked(id, all...))
	}, all...)
}

func runDM(n *net) {
	a, b := n.member("alice", nil, nil), n.member("bob", nil, nil)
	// Creating the DM again returns it; an app repeats a creation that
	// failed until the DM holds the peer.
	var id []byte
	for i := 0; i < 30 && id == nil; i++ {
		dm, err := a.C.CreateDM(n.w.Ctx, b.C.InboxID())
		if dm == nil {
			continue
		}
		if ms, merr := dm.Members(n.w.Ctx); err == nil && merr == nil && len(ms) == 2 {
			id = dm.ID()
		}
	}
	if id == nil {
		n.t.Fatal("alice: create dm: bob never added")
	}
	n.settle("join", func() error {
		bdm, err := b.C.DM(n.w.Ctx, a.C.InboxID())
		if err != nil {
			return err
		}
		if !bytes.Equal(bdm.ID(), id) {
			return fmt.Errorf("bob's DM %x is not alice's %x", bdm.ID(), id)
		}
		return agree(id, a, b)
	}, a, b)
	want := []string{send(n, a, id, "hi bob"), send(n, b, id, "hi alice")}
	update(n, b, id)
	n.settle("converge", func() error {
		return errors.Join(agree(id, a, b), holds(id, want, a, b), confirmed(id, a, b), notForked(id, a, b))
	}, a, b)
}

func runReadd(n *net) {
	a, b := n.member("alice", nil, nil), n.member("bob", nil, nil)
	id := create(n, a, b)
	n.settle("join", func() error { return agree(id, a, b) }, a, b)
	before := []string{send(n, a, id, "before removal")}
	n.settle("delivered", func() error { return holds(id, before, a, b) }, a, b)
	n.membership(a, id, "remove", func(cv *client.Conversation) error { return cv.RemoveMembers(n.w.Ctx, b.C.InboxID()) },
		func(held []client.Member) bool {
			return !slices.ContainsFunc(held, func(h client.Member) bool { return h.InboxID == b.C.InboxID() })
		})
	n.settle("removed", func() error {
		if i, err := info(b, id); err != nil || i.Active {
			return fmt.Errorf("bob still active (%v)", err)
		}
		return nil
	}, a, b)
	away := send(n, a, id, "while bob was away")
	add(n, a, id, b)
	n.settle("re-added", func() error {
		return errors.Join(agree(id, a, b), holds(id, before, b), holds(id, append(before, away), a))
	}, a, b)
	back := send(n, b, id, "bob is back")
	n.settle("converge", func() error {
		return errors.Join(agree(id, a, b), holds(id, append(before, back), b), holds(id, append(before, away, back), a))
	}, a, b)
}

var requester = &client.Options{Recovery: client.RecoveryPolicy{Mode: client.RecoverAll}}

func runForkRepair(n *net) {
	a, b, c := n.member("alice", nil, nil), n.member("bob", requester, nil), n.member("carol", nil, nil)
	all := []*world.Member{a, b, c}
	id := create(n, a, b, c)
	n.settle("join", func() error { return agree(id, all...) }, all...)
	allowed(n, id, all...)
	update(n, a, id)
	n.settle("healthy", func() error { return errors.Join(agree(id, all...), notForked(id, all...)) }, all...)

	// Bob's log records another epoch authenticator for the next commit:
	// his log forks, the others' does not, and the readd repairs him.
	forkBob(n, id, a, b, c)
	key := b.C.InstallationKey()
	// A readd request that reached nobody waits a minute of the clock
	// before it is sent again (FORK-051); a readder that found no valid
	// key package for bob (a newest id lied downward) waits the refresh
	// interval (FORK-062). Under a lossy service that takes several
	// attempts, so the clock also jumps past the refresh interval.
	repaired := func() error {
		for _, m := range []*world.Member{a, c} {
			r, err := readds(m, id, key)
			if err != nil || len(r) == 0 {
				return fmt.Errorf("%s merged no readd of bob (%v)", m.Name, err)
			}
		}
		return agree(id, all...)
	}
	for i := 0; i < 3; i++ {
		if n.poll(16, repaired, all...) == nil {
			break
		}
		n.clk.Advance(recovery.DefaultRefreshInterval)
	}
	n.settle("repaired", repaired, all...)
	update(n, c, id)
	want := ports.ForkNotForked
	n.settle("converge", func() error {
		errs := []error{agree(id, all...), forkState(id, &want, all...)}
		for _, m := range []*world.Member{a, c} {
			if r, err := readds(m, id, key); err != nil || len(r) != 1 {
				errs = append(errs, fmt.Errorf("%s merged readds of bob at %v, want exactly one (%v)", m.Name, r, err))
			}
		}
		return errors.Join(errs...)
	}, all...)
}

// forkBob forks bob's log in group id: alice commits while bob's engine
// records another epoch authenticator for the commit. Bob reads forked
// only when the misrecorded commit is the newest he shares with alice's
// log; when a lossy service made alice commit again before bob read her
// entry, the later entries agree and he does not (the fork state follows
// the newest shared commit), so the fault is armed again until he reads
// forked or is already readded.
func forkBob(n *net, id []byte, a, b, c *world.Member) {
	n.t.Helper()
	all := []*world.Member{a, b, c}
	// Forked, or already readded: the repair may start in the same round.
	bobForked := func() error {
		if r, err := readds(a, id, b.C.InstallationKey()); err == nil && len(r) > 0 {
			return nil
		}
		st, err := b.Conv(id).ForkState(n.w.Ctx)
		if err == nil && st.State != ports.ForkForked {
			err = fmt.Errorf("bob: fork state %v", st.State)
		}
		return err
	}
	for i := 0; i < 5; i++ {
		n.settle("caught up", func() error { return agree(id, all...) }, all...)
		b.Engine.Arm(id, mlsfault.MisrecordAuthenticator)
		update(n, a, id)
		if n.poll(24, bobForked, all...) == nil {
			return
		}
		b.Engine.Disarm(id)
	}
	n.t.Fatal("bob's log never forked")
}

func runKeyRotation(n *net) {
	a, b := n.member("alice", nil, nil), n.member("bob", nil, nil)
	first, err := b.C.KeyPackages().Current(n.w.Ctx)
	if err != nil {
		n.t.Fatal(err)
	}
	g1 := create(n, a, b)
	n.settle("join", func() error { return agree(g1, a, b) }, a, b)
	// The Welcome used bob's package: his next ticks replace it (JOIN-016).
	n.settle("rotated", func() error {
		cur, err := b.C.KeyPackages().Current(n.w.Ctx)
		if err != nil {
			return err
		}
		if bytes.Equal(cur.Ref, first.Ref) {
			return errors.New("bob's key package not rotated")
		}
		return nil
	}, a, b)
	// A day later the old package's keys are destroyed; the new package
	// still joins bob to a new group.
	n.clk.Advance(25 * time.Hour)
	g2 := create(n, a, b)
	n.settle("joined with the rotated package", func() error {
		return errors.Join(agree(g2, a, b), agree(g1, a, b))
	}, a, b)
}

func runWorkers(n *net) {
	fast := &client.Options{SyncInterval: 300 * time.Millisecond}
	a, b := n.member("alice", fast, nil), n.member("bob", fast, nil)
	id := create(n, a, b)
	n.settle("join", func() error { return agree(id, a, b) }, a, b)
	for _, m := range []*world.Member{a, b} {
		if err := m.C.Start(n.w.Ctx); err != nil {
			n.t.Fatal(err)
		}
	}
	var want []string
	for i := 0; i < 3; i++ {
		want = append(want, send(n, a, id, fmt.Sprintf("streamed %d", i)))
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := holds(id, want, b)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("workers: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
		n.clk.Advance(time.Second) // the outbox resends what a lost publish left
	}
}
