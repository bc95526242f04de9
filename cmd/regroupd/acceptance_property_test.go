package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/internal/rogue"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/mlsfault"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// COMP-371 (role policy): a member who is not an admin commits a rename
// its own client would refuse; regroupd refuses it by the role policy
// (public_policy), stores it nowhere, and the group goes on.
func TestCOMP371_ForbiddenChangeRefusedOverGRPC(t *testing.T) {
	for _, mode := range acceptModes {
		t.Run(mode, func(t *testing.T) {
			a := newAcceptance(t, mode)
			alice, bob := a.member("alice", world.Config{}), a.member("bob", world.Config{})
			mallory := a.member("mallory", world.Config{MLS: rogue.Engine})
			id := a.newGroup(alice, bob, mallory)
			before := a.highest(ports.TopicGroupMessages, id)
			_, err := rogue.Of(mallory).Rename(id, "taken")
			if !errors.Is(err, ports.ErrInvalidArgument) || !strings.Contains(err.Error(), "role policy") {
				t.Fatalf("a plain member's rename: %v, want a refusal by the role policy", err)
			}
			if got := a.highest(ports.TopicGroupMessages, id); got != before {
				t.Fatalf("the forbidden commit was stored")
			}
			if err := alice.Conv(id).SetName(a.Ctx, "renamed by its owner"); err != nil {
				t.Fatal(err)
			}
			world.SyncAll(alice, bob)
			world.Agree(t, id, alice, bob)
			if bob.Info(id).Name != "renamed by its owner" {
				t.Fatalf("bob reads name %q", bob.Info(id).Name)
			}
			a.follows(id, alice, bob)
		})
	}
}

// raceTransport runs before, once armed, ahead of the next publish of a
// group-message envelope, so that another member's commit wins the epoch
// the publisher built its commit for.
type raceTransport struct {
	ports.Transport
	armed  atomic.Bool
	before func()
}

func (r *raceTransport) Publish(ctx context.Context, envs []*backendpb.ClientEnvelope) ([]uint64, error) {
	if len(envs) > 0 && ports.TopicKind(envs[0].GetTargetTopic()[0]) == ports.TopicGroupMessages && r.armed.CompareAndSwap(true, false) {
		r.before()
	}
	return r.Transport.Publish(ctx, envs)
}

// COMP-374: a client whose commit another commit beat on a regroupd that
// follows the group is told ErrEpochConflict, catches up and builds its
// change again: the change lands, nothing is dropped.
func TestCOMP374_ClientRetriesAfterEpochConflict(t *testing.T) {
	a := newAcceptance(t, "sqlite")
	race := &raceTransport{}
	alice := a.member("alice", world.Config{Transport: func(tr ports.Transport) ports.Transport { race.Transport = tr; return race }})
	bob := a.member("bob", world.Config{})
	id := a.newGroup(alice, bob)
	race.before = func() {
		if err := bob.Conv(id).UpdateKeys(a.Ctx); err != nil {
			t.Errorf("bob's winning commit: %v", err)
		}
	}
	race.armed.Store(true)
	epoch := alice.Info(id).Epoch
	if err := alice.Conv(id).SetName(a.Ctx, "after the race"); err != nil {
		t.Fatalf("alice's rename lost its epoch and was not retried: %v", err)
	}
	world.SyncAll(alice, bob)
	world.Agree(t, id, alice, bob)
	if got := bob.Info(id); got.Name != "after the race" || got.Epoch != epoch+2 {
		t.Fatalf("bob at epoch %d reads %q, want epoch %d and the rename", got.Epoch, got.Name, epoch+2)
	}
	a.follows(id, alice, bob)
}

// acceptanceSteps is the number of random commits of the property test:
// REGROUP_ACCEPTANCE_COMMITS (make acceptance sets 200), else 8, enough
// for every move once.
func acceptanceSteps(t *testing.T) int {
	if v := os.Getenv("REGROUP_ACCEPTANCE_COMMITS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("REGROUP_ACCEPTANCE_COMMITS=%q is not a positive integer", v)
		}
		return n
	}
	return 8
}

// The moves of the property test.
const (
	moveAdd = iota
	moveRemove
	moveReadd
	moveRename
	moveUpdate
	moveResync
	moveForkReadd
	moves
)

// requester asks to be readded when its log forks (FORK-050), and
// answers other members' requests.
var requester = &client.Options{Recovery: client.RecoveryPolicy{Mode: client.RecoverAll}}

// COMP-370, COMP-371, COMP-375, COMP-405: random commits by live clients through
// regroupd — adds, removes, updates, removals and adds back of one inbox,
// metadata changes, resyncs of a member whose state diverged
// (Conversation.Resync, an external commit) and readds of a member whose
// log forked (the fork-repair path: its request, the super admin's readd
// commit, its Welcome) — and after each the service's public state
// (epoch, tree hash, group context) equals every member's. Every move
// comes once among the first steps. Halfway, regroupd is SIGKILLed while
// a commit is in flight and restarted on its database; the state it
// comes back with still equals the members', and the run goes on.
func TestCOMP370_ServiceFollowsRandomCommits(t *testing.T) {
	for _, mode := range acceptModes {
		t.Run(mode, func(t *testing.T) { testFollowsRandomCommits(t, mode) })
	}
}

func testFollowsRandomCommits(t *testing.T, mode string) {
	n := acceptanceSteps(t)
	a := newAcceptanceFor(t, mode, 2*time.Minute+time.Duration(n)*5*time.Second)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 28))
	seed := rng.Uint64()
	t.Logf("seed %d, %d commits", seed, n)
	rng = rand.New(rand.NewPCG(seed, 28))
	alice := a.member("alice", world.Config{})
	var pool []*world.Member
	for _, name := range []string{"bob", "carol", "dave", "erin"} {
		pool = append(pool, a.member(name, world.Config{Options: requester}))
	}
	in := []*world.Member{alice, pool[0], pool[1]}
	out := []*world.Member{pool[2], pool[3]}
	id := a.newGroup(alice, in[1:]...)
	a.follows(id, in...)
	pick := func(ms []*world.Member) *world.Member { return ms[rng.IntN(len(ms))] }
	join := func(m *world.Member) {
		world.SyncAll(append(slices.Clone(in), m)...)
		if err := m.Conv(id).SetConsent(a.Ctx, ports.ConsentAllowed); err != nil {
			t.Fatal(err)
		}
	}
	// another is a member other than m that commits while m is diverged.
	another := func(m *world.Member) *world.Member {
		if m != alice {
			return alice
		}
		return in[1]
	}
	kill := n / 2
	schedule := rng.Perm(moves)
	counts := make([]int, moves)
	for step := range n {
		// A removal keeps three members, so that the moves on a member
		// other than the super admin stay possible.
		possible := func(k int) bool {
			switch k {
			case moveAdd:
				return len(out) > 0
			case moveRemove:
				return len(in) > 3
			case moveReadd, moveForkReadd:
				return len(in) > 2
			}
			return true
		}
		k := moveUpdate
		switch {
		case step == kill:
			// The commit in flight at the SIGKILL is one commit, which
			// the member can make again if it was lost.
			k = []int{moveRename, moveUpdate, moveResync}[rng.IntN(3)]
		case len(schedule) > 0:
			// The first scheduled move possible now: every move is made
			// once in the first steps.
			if i := slices.IndexFunc(schedule, possible); i >= 0 {
				k = schedule[i]
				schedule = slices.Delete(schedule, i, i+1)
			}
		default:
			if r := rng.IntN(moves); possible(r) {
				k = r
			}
		}
		counts[k]++
		var op string
		var do func() error
		switch k {
		case moveAdd:
			m := pick(out)
			op, do = "add "+m.Name, func() error {
				if err := alice.Conv(id).AddMembers(a.Ctx, m.C.InboxID()); err != nil {
					return err
				}
				in, out = append(in, m), slices.DeleteFunc(out, func(x *world.Member) bool { return x == m })
				join(m)
				return nil
			}
		case moveRemove:
			m := pick(in[1:])
			op, do = "remove "+m.Name, func() error {
				if err := alice.Conv(id).RemoveMembers(a.Ctx, m.C.InboxID()); err != nil {
					return err
				}
				in, out = slices.DeleteFunc(in, func(x *world.Member) bool { return x == m }), append(out, m)
				return nil
			}
		case moveReadd:
			m := pick(in[1:])
			op, do = "remove and add back "+m.Name, func() error {
				if err := alice.Conv(id).RemoveMembers(a.Ctx, m.C.InboxID()); err != nil {
					return err
				}
				world.SyncAll(in...)
				if err := alice.Conv(id).AddMembers(a.Ctx, m.C.InboxID()); err != nil {
					return err
				}
				join(m)
				return nil
			}
		case moveRename:
			op, do = "rename", func() error { return alice.Conv(id).SetName(a.Ctx, "name "+strconv.Itoa(step)) }
		case moveUpdate:
			m := pick(in)
			op, do = "update "+m.Name, func() error { return m.Conv(id).UpdateKeys(a.Ctx) }
		case moveResync:
			// Not the super admin: after its resync the other members'
			// fork state reads unknown for good, and no fork readd could
			// follow (FORK-030 needs not forked).
			m := pick(in[1:])
			op = "resync " + m.Name
			if step != kill {
				// m merges the next commit and then diverges: it can no
				// longer process its group, which a resync repairs.
				op += " after diverging"
				m.Engine.Arm(id, mlsfault.DivergeAfterMerge)
				if err := another(m).Conv(id).UpdateKeys(a.Ctx); err != nil {
					t.Fatalf("step %d (%s): %v", step, op, err)
				}
				world.SyncAll(in...)
			}
			do = func() error { _, err := m.Conv(id).Resync(a.Ctx); return err }
		case moveForkReadd:
			m := pick(in[1:])
			op, do = "fork and readd "+m.Name, func() error { return forkReadd(a, id, alice, m, in) }
		}
		if step == kill {
			// SIGKILL regroupd while the commit is in flight, then start
			// it again on its database. A commit the kill lost is made
			// again.
			done := make(chan error, 1)
			go func() { done <- do() }()
			time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
			a.Regroupd.Restart()
			if err := <-done; err != nil {
				t.Logf("step %d (%s) across the SIGKILL: %v", step, op, err)
				reconnect(t, a, in)
				if err := do(); err != nil {
					t.Fatalf("step %d (%s) after the restart: %v", step, op, err)
				}
			}
			reconnect(t, a, in)
		} else if err := do(); err != nil {
			t.Fatalf("step %d (%s): %v", step, op, err)
		}
		world.SyncAll(in...)
		world.Agree(t, id, in...)
		a.follows(id, in...)
	}
	t.Logf("moves: %d adds, %d removes, %d removals and adds back, %d renames, %d updates, %d resyncs, %d fork readds",
		counts[moveAdd], counts[moveRemove], counts[moveReadd], counts[moveRename], counts[moveUpdate], counts[moveResync], counts[moveForkReadd])
}

// forkReadd forks m's commit log — m, not forked, records another epoch authenticator
// for the super admin's next commit — and has the fork repaired the way
// FORK-050 to FORK-064 do: m's readd request, the super admin's readd
// commit, m's join from its Welcome.
func forkReadd(a *acceptance, id []byte, admin, m *world.Member, in []*world.Member) error {
	// A member that joined lately reads unknown until a commit after its
	// join agrees (FORK-030); only a member that reads not forked can fork.
	for i := 0; m.ForkState(id) != ports.ForkNotForked; i++ {
		if i == 3 {
			return fmt.Errorf("%s reads %v after %d commits, want not forked", m.Name, m.ForkState(id), i)
		}
		if err := admin.Conv(id).UpdateKeys(a.Ctx); err != nil {
			return err
		}
		world.SyncAll(in...)
	}
	m.Sync()
	m.Engine.Arm(id, mlsfault.MisrecordAuthenticator)
	if err := admin.Conv(id).UpdateKeys(a.Ctx); err != nil {
		return err
	}
	admin.Sync()
	m.Sync()
	if st := m.ForkState(id); st != ports.ForkForked {
		return fmt.Errorf("%s after a misrecorded authenticator: fork state %v, want forked", m.Name, st)
	}
	epoch := admin.Info(id).Epoch
	world.SyncAll(append([]*world.Member{m, admin}, in...)...)
	if got := admin.Info(id).Epoch; got != epoch+1 {
		return fmt.Errorf("the super admin at epoch %d after %s's request, want %d: no readd commit", got, m.Name, epoch+1)
	}
	if st := m.ForkState(id); st == ports.ForkForked {
		return fmt.Errorf("%s still forked after its readd", m.Name)
	}
	return nil
}

// COMP-376: -accept-commits is off by default, a malformed environment
// value is refused like a malformed flag, and with it on regroupd starts
// with the engine's validator checking commits.
func TestCOMP376_AcceptCommitsSwitch(t *testing.T) {
	if cfg, err := parseConfig(nil); err != nil || cfg.AcceptCommits {
		t.Fatalf("default: accept commits %v, %v; want off", cfg.AcceptCommits, err)
	}
	if cfg, err := parseConfig([]string{"-accept-commits"}); err != nil || !cfg.AcceptCommits {
		t.Fatalf("-accept-commits: %v, %v", cfg.AcceptCommits, err)
	}
	t.Setenv("REGROUPD_ACCEPT_COMMITS", "maybe")
	if _, err := parseConfig(nil); err == nil || !strings.Contains(err.Error(), "accept-commits") {
		t.Fatalf("REGROUPD_ACCEPT_COMMITS=maybe: %v, want a refusal naming the flag", err)
	}
	t.Setenv("REGROUPD_ACCEPT_COMMITS", "true")
	cfg := testConfig(t, "sqlite")
	if !cfg.AcceptCommits {
		t.Fatal("REGROUPD_ACCEPT_COMMITS=true did not turn it on")
	}
	if cfg.PublicCacheBytes != mls.DefaultPublicCacheBytes {
		t.Fatalf("-public-cache-bytes defaults to %d, want %d", cfg.PublicCacheBytes, mls.DefaultPublicCacheBytes)
	}
	srv, err := start(context.Background(), cfg, quietLog())
	if err != nil {
		t.Fatalf("start with -accept-commits: %v", err)
	}
	defer srv.stop()
	if !srv.svc.Accepting() {
		t.Fatal("regroupd started with -accept-commits does not check commits")
	}
}

// reconnect syncs each member until its transport reaches the restarted
// regroupd again (a gRPC connection waits out its reconnect backoff).
func reconnect(t *testing.T, a *acceptance, ms []*world.Member) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for _, m := range ms {
		for {
			err := m.C.SyncAll(a.Ctx)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not reach the restarted regroupd: %v", m.Name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
