package client_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"
	"time"

	regroup "github.com/regroup-mls/regroup"
	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
)

// The environment that turns the test binary into the restart child.
const (
	envChildStore  = "REGROUP_CLIENT_CHILD_STORE"
	envChildServer = "REGROUP_CLIENT_CHILD_SERVER"
)

// PROC-008: a client killed with SIGKILL at any point of processing its
// topics resumes, after a restart, where it stopped: every message is
// stored exactly once, and it ends at the same epoch and epoch
// authenticator as the group. The child process processes bob's topics in
// a loop until the parent kills it, round after round, until a kill has
// landed part way through the topic.
func TestPROC008_RestartAnywhereResumes(t *testing.T) {
	if path := os.Getenv(envChildStore); path != "" {
		restartChild(t, path, os.Getenv(envChildServer))
		return
	}
	w := world.New(t, "sqlite")
	alice := newMember(w, "alice", nil)
	bob := newMember(w, "bob", nil)
	bobPath := bob.Path
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Members: []string{bob.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	bob.Sync()
	bobInbox := bob.C.InboxID()
	bob.Close()
	// Each round alice sends more messages and the child, processing
	// them, is killed after a growing delay, until a kill has landed while
	// it was part way through.
	sentTotal, held, midway := 0, 0, false
	for round := 0; round < 15 && !(midway && round >= 2); round++ {
		for i := 0; i < 60; i++ {
			if _, err := g.Send(w.Ctx, []byte(fmt.Sprintf("m%04d", sentTotal))); err != nil {
				t.Fatal(err)
			}
			sentTotal++
			if sentTotal%25 == 10 {
				if err := g.UpdateKeys(w.Ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		cmd := exec.Command(os.Args[0], "-test.run", "^TestPROC008_RestartAnywhereResumes$")
		cmd.Env = append(os.Environ(), envChildStore+"="+bobPath, envChildServer+"="+w.Regroupd.Addr)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(20+40*round+rand.IntN(40)) * time.Millisecond)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		n := storedMessages(t, bobPath, g.ID())
		if n < held {
			t.Fatalf("after kill %d bob holds %d messages, fewer than the %d before", round, n, held)
		}
		if n > held && n < sentTotal {
			midway = true
		}
		held = n
		t.Logf("kill %d: bob holds %d of %d messages", round, n, sentTotal)
	}
	if !midway {
		t.Fatal("no kill landed while the child was part way through the topic")
	}
	messages := sentTotal
	// The last restart finishes the work: the world's member "bob" again,
	// on the same store.
	bob2 := newMember(w, "bob", nil)
	if bob2.C.InboxID() != bobInbox {
		t.Fatalf("reopened store is inbox %s, want %s", bob2.C.InboxID(), bobInbox)
	}
	bob2.Sync()
	world.Agree(t, g.ID(), alice, bob2)
	got := texts(t, bob2, g.ID())
	if len(got) != messages {
		t.Fatalf("bob holds %d messages, want %d", len(got), messages)
	}
	for i, m := range got {
		if want := fmt.Sprintf("m%04d", i); m != want {
			t.Fatalf("message %d is %q, want %q", i, m, want)
		}
	}
}

// storedMessages counts the application messages in the SQLite store at
// path, opened after the child that used it was killed.
func storedMessages(t *testing.T, path string, id []byte) int {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, &sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n := 0
	err = st.Tx(ctx, func(tx ports.Tx) error {
		ms, err := tx.(ports.MessageTx).Messages().List(ctx, id, 0, 0)
		for _, m := range ms {
			if m.Kind == ports.MessageApplication {
				n++
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// restartChild opens bob's store and processes his topics until killed.
func restartChild(t *testing.T, path, server string) {
	ctx := context.Background()
	c, cleanup, err := regroup.NewNetworked(ctx, regroup.NetworkedConfig{Server: server, SQLitePath: path})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	for {
		_ = c.SyncAll(ctx)
	}
}
