package hostile_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/mlsfault"
)

// crashReaddKills is how many times TestCrashReaddResponse kills the
// readder: 2 in the ordinary test run, REGROUP_CRASH_KILLS when set (the
// long mode, e.g. REGROUP_CRASH_KILLS=30).
func crashReaddKills() int {
	if v, err := strconv.Atoi(os.Getenv("REGROUP_CRASH_KILLS")); err == nil && v > 0 {
		return v
	}
	return 2
}

// TestCrashReaddResponse SIGKILLs a readder while it answers readd
// requests, on a real regroupd over gRPC. Bob, the group's only super
// admin and so its only permitted readder, runs as the crashing child of
// TestCrashAnywhere; carol's log forks at a commit of alice's every round
// while bob is down, she sends a request, and bob's child processes the
// topic, publishes its log, raises the version floor and publishes the
// readd commit and its Welcome until the kill. After the last restart it
// checks what a crash must not break in a repair:
//
//   - no readd published twice: every fork of carol is answered by at
//     most one readd commit (FORK-064), and the last one by exactly one;
//   - no Welcome lost: carol is active again at bob's epoch and epoch
//     authenticator, and bob's Welcome outbox is empty;
//   - cursor consistent with MLS state: alice, bob and carol agree.
func TestCrashReaddResponse(t *testing.T) {
	w := world.NewFor(t, "sqlite", 3*time.Minute)
	bob := w.Member("bob", world.Config{})
	alice := w.Member("alice", world.Config{})
	carol := w.Member("carol", world.Config{Options: &client.Options{Recovery: client.RecoveryPolicy{Mode: client.RecoverAll}}})
	cv, err := bob.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "g", Members: []string{alice.C.InboxID(), carol.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	id := cv.ID()
	for _, m := range []*world.Member{alice, bob, carol} {
		m.Sync()
		if c, err := m.C.Conversation(w.Ctx, id); err != nil || c.SetConsent(w.Ctx, ports.ConsentAllowed) != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
	}
	world.Round(alice, bob, carol)
	bobPath := bob.Path
	bob.Close()
	key := carol.C.InstallationKey()
	r := rand.New(rand.NewPCG(51, 51))
	delay := 300 * time.Millisecond
	forks := 0
	for round := 0; round < crashReaddKills(); round++ {
		// Carol's log forks at alice's next commit unless a fork is
		// still being repaired.
		if st, err := carol.Conv(id).ForkState(w.Ctx); err == nil && st.State != ports.ForkForked {
			carol.Engine.Arm(id, mlsfault.MisrecordAuthenticator)
			forks++
		}
		if err := alice.Conv(id).UpdateKeys(w.Ctx); err != nil {
			t.Fatal(err)
		}
		before := readdCount(t, alice, id, key)
		cmd := exec.Command(os.Args[0], "-test.run", "^TestCrashAnywhere$")
		cmd.Env = append(os.Environ(), envCrashStore+"="+bobPath, envCrashServer+"="+w.Regroupd.Addr,
			fmt.Sprintf("%s=%d", envCrashSeed, round))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Carol detects the fork from bob's entry and requests while bob runs.
		deadline := time.Now().Add(delay/2 + time.Duration(r.Int64N(int64(delay))))
		for time.Now().Before(deadline) {
			world.Round(alice, carol)
		}
		_ = cmd.Process.Kill() // SIGKILL
		_ = cmd.Wait()
		world.Round(alice, carol)
		after := readdCount(t, alice, id, key)
		if after == before {
			delay = min(delay*3/2, 8*time.Second)
		} else {
			delay = max(delay*2/3, 20*time.Millisecond)
		}
		t.Logf("kill %d: %d readds of carol, %d forks so far", round, after, forks)
	}

	bob2 := w.Member("bob", world.Config{})
	carol.Engine.Disarm(id)
	all := []*world.Member{alice, bob2, carol}
	var last error
	for i := 0; i < 20; i++ {
		world.Round(all...)
		if last = agree(id, all...); last == nil {
			if st, err := carol.Conv(id).ForkState(w.Ctx); err == nil && st.State != ports.ForkForked {
				break
			}
			last = errors.New("carol still forked")
		}
	}
	if last != nil {
		t.Fatalf("after the last restart: %v", last)
	}
	n := readdCount(t, alice, id, key)
	if n == 0 || n > forks {
		t.Errorf("%d readds of carol for %d forks: a readd published twice, or none", n, forks)
	}
	if pending := outboxLen(t, bob2); pending != 0 {
		t.Errorf("bob still holds %d readd Welcomes to publish", pending)
	}
}

func readdCount(t *testing.T, m *world.Member, id, key []byte) int {
	t.Helper()
	r, err := readds(m, id, key)
	if err != nil {
		t.Fatal(err)
	}
	return len(r)
}

// outboxLen counts the Welcomes m keeps to publish again (COMP-243).
func outboxLen(t *testing.T, m *world.Member) int {
	t.Helper()
	n := 0
	m.Tx(func(tx ports.Tx) error {
		keys, err := tx.Blobs().Keys(m.W.Ctx, "client.welcome-outbox", "")
		n = len(keys)
		return err
	})
	return n
}
