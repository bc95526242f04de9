package hostile_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	regroup "github.com/regroup-mls/regroup"
	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
)

// The environment that turns the test binary into the crashing child.
const (
	envCrashStore  = "REGROUP_CRASH_CHILD_STORE"
	envCrashServer = "REGROUP_CRASH_CHILD_SERVER"
	envCrashSeed   = "REGROUP_CRASH_CHILD_SEED"
)

// TestCrashAnywhere SIGKILLs a client process at random points of a long
// scenario and restarts it, round after round, on a real regroupd over
// gRPC. The child, bob, runs every duty in a loop: it joins the groups
// alice adds it to (Welcomes), processes their commits and messages,
// publishes and reads their commit logs, rotates and destroys its key
// packages, and commits key updates of its own. After the last restart it
// checks every invariant a crash must not break:
//
//   - cursor consistent with MLS state: bob ends every group at alice's
//     epoch and epoch authenticator, holding each of alice's messages
//     exactly once;
//   - no Welcome lost or applied twice: bob holds each group alice added
//     it to, once;
//   - no commit-log entry skipped or published twice: bob's local entries
//     are numbered without a gap, and alice accepted each of bob's entries
//     for a commit at most once;
//   - no key destroyed early: every Welcome reached a key that could open
//     it (bob joined every group; none is held or rejected).
func TestCrashAnywhere(t *testing.T) {
	if path := os.Getenv(envCrashStore); path != "" {
		crashChild(path, os.Getenv(envCrashServer), os.Getenv(envCrashSeed))
		return
	}
	w := world.NewFor(t, "sqlite", 3*time.Minute)
	alice := w.Member("alice", world.Config{})
	bob := w.Member("bob", world.Config{})
	bobPath, bobInbox := bob.Path, bob.C.InboxID()
	bob.Close()
	r := rand.New(rand.NewPCG(25, 25))

	var groups [][]byte
	sent := map[string][]string{}
	held, midway := 0, false
	// The kill comes after a delay that adapts to the machine: shorter
	// after a round the child finished, longer after one in which it made
	// no progress, so that kills land part way through its work on a quiet
	// machine and a loaded one alike.
	delay := 200 * time.Millisecond
	for round := 0; round < 9 || (!midway && round < 18); round++ {
		// Alice's work for the round: a new group with bob every third
		// round, then messages and a key update in each group.
		if round%3 == 0 {
			g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: fmt.Sprint(round), Members: []string{bobInbox}})
			if err != nil {
				t.Fatal(err)
			}
			if err := g.SetConsent(w.Ctx, ports.ConsentAllowed); err != nil {
				t.Fatal(err)
			}
			groups = append(groups, g.ID())
		}
		for _, id := range groups {
			for i := 0; i < 5; i++ {
				text := fmt.Sprintf("r%d-%d", round, i)
				if _, err := alice.Conv(id).Send(w.Ctx, []byte(text)); err != nil {
					t.Fatal(err)
				}
				sent[string(id)] = append(sent[string(id)], text)
			}
			if err := alice.Conv(id).UpdateKeys(w.Ctx); err != nil {
				t.Fatal(err)
			}
		}
		alice.Sync()
		cmd := exec.Command(os.Args[0], "-test.run", "^TestCrashAnywhere$")
		cmd.Env = append(os.Environ(), envCrashStore+"="+bobPath, envCrashServer+"="+w.Regroupd.Addr,
			fmt.Sprintf("%s=%d", envCrashSeed, round))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay/2 + time.Duration(r.Int64N(int64(delay))))
		_ = cmd.Process.Kill() // SIGKILL
		_ = cmd.Wait()
		total := 0
		for _, texts := range sent {
			total += len(texts)
		}
		n := storedMessages(t, bobPath)
		switch {
		case n > held && n < total:
			midway = true // this kill landed part way through the work
		case n == total:
			delay = max(delay*2/3, 5*time.Millisecond)
		case n == held:
			delay = min(delay*3/2, 5*time.Second)
		}
		t.Logf("kill %d: bob holds %d of %d messages", round, n, total)
		held = n
	}
	if !midway {
		t.Error("no kill landed while bob was part way through its work")
	}

	bob2 := w.Member("bob", world.Config{})
	if bob2.C.InboxID() != bobInbox {
		t.Fatalf("restarted bob is inbox %s, want %s", bob2.C.InboxID(), bobInbox)
	}
	for i := 0; i < 3; i++ {
		world.Round(alice, bob2)
	}
	convs, err := bob2.C.Conversations(w.Ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(convs) != len(groups) {
		t.Errorf("bob holds %d conversations, alice added him to %d (a Welcome lost or applied twice)", len(convs), len(groups))
	}
	heldW, _ := bob2.C.HeldWelcomes(w.Ctx)
	rejected, _ := bob2.C.RejectedWelcomes(w.Ctx)
	if len(heldW)+len(rejected) != 0 {
		t.Errorf("bob holds %d and rejected %d Welcomes; want every one applied (a key destroyed early?)", len(heldW), len(rejected))
	}
	for _, id := range groups {
		if err := agree(id, alice, bob2); err != nil {
			t.Errorf("cursor and MLS state: %v", err)
		}
		if err := holds(id, sent[string(id)], bob2); err != nil {
			t.Errorf("messages: %v", err)
		}
		checkEntries(t, id, alice, bob2)
	}
}

// checkEntries: bob's local commit-log entries are numbered without a gap,
// and alice accepted each of bob's entries for a commit at most once.
func checkEntries(t *testing.T, id []byte, alice, bob *world.Member) {
	t.Helper()
	local, err := bob.Conv(id).LocalEntries(bob.W.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range local {
		if i > 0 && e.Seq != local[i-1].Seq+1 {
			t.Errorf("bob's local entries of %x jump from %d to %d", id[:4], local[i-1].Seq, e.Seq)
		}
	}
	remote, err := alice.Conv(id).RemoteEntries(alice.W.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	var seen []uint64
	for _, e := range remote {
		if !bytes.Equal(e.AuthorInstallationKey, bob.C.InstallationKey()) {
			continue
		}
		if slices.Contains(seen, e.CommitSequenceID) {
			t.Errorf("alice accepted two of bob's entries for commit %d of %x", e.CommitSequenceID, id[:4])
		}
		seen = append(seen, e.CommitSequenceID)
	}
}

// storedMessages counts the application messages in the SQLite store at
// path, opened after the child that used it was killed.
func storedMessages(t *testing.T, path string) int {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, &sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n := 0
	err = st.Tx(ctx, func(tx ports.Tx) error {
		gs, err := tx.Groups().List(ctx, ports.GroupFilter{})
		for _, g := range gs {
			ms, err := tx.(ports.MessageTx).Messages().List(ctx, g.ID, 0, 0)
			if err != nil {
				return err
			}
			for _, m := range ms {
				if m.Kind == ports.MessageApplication {
					n++
				}
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// crashChild is bob until the parent kills it: every duty in a loop, and
// a key update of its own in a group now and then.
func crashChild(path, server, seed string) {
	ctx := context.Background()
	c, cleanup, err := regroup.NewNetworked(ctx, regroup.NetworkedConfig{Server: server, SQLitePath: path})
	if err != nil {
		os.Exit(2)
	}
	defer cleanup()
	r := rand.New(rand.NewPCG(uint64(len(seed)), uint64(seed[0])))
	for {
		_ = c.SyncAll(ctx)
		convs, _ := c.Conversations(ctx, nil)
		for _, cv := range convs {
			_ = cv.SetConsent(ctx, ports.ConsentAllowed)
			if r.IntN(3) == 0 {
				_ = cv.UpdateKeys(ctx)
			}
		}
	}
}
