package main

import (
	"slices"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/internal/testenv"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
)

// backupKit is the documented backup and restore (testenv.BackupKit).
type backupKit struct{ *testenv.BackupKit }

func newBackupKit(t *testing.T, mode string, r *testenv.Regroupd) *backupKit {
	t.Helper()
	return &backupKit{testenv.NewBackupKit(t, mode, r)}
}

// backup takes the backup while regroupd runs.
func (k *backupKit) backup() { k.Backup() }

// putBack puts the backup back, with restore mode or without.
func (k *backupKit) putBack(restoreMode bool) { k.PutBack(restoreMode) }

// waitServing syncs m until the restarted regroupd answers.
func waitServing(t *testing.T, m *world.Member) { t.Helper(); world.WaitServing(t, m) }

// heldMessages returns the member's application messages of the group.
func heldMessages(t *testing.T, m *world.Member, id []byte) []ports.Message {
	t.Helper()
	msgs, err := m.Conv(id).Messages(m.W.Ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []ports.Message
	for _, msg := range msgs {
		if msg.Kind == ports.MessageApplication {
			out = append(out, msg)
		}
	}
	return out
}

// restoreScenario is a group of two that talks, is backed up, talks on,
// is put back (with or without restore mode) and talks again; it returns
// the members and the group.
func restoreScenario(t *testing.T, mode string, restoreMode bool) (alice, bob *world.Member, group []byte, ids map[string]uint64) {
	w := world.NewFor(t, mode, 3*time.Minute)
	kit := newBackupKit(t, mode, w.Regroupd)
	alice, bob = w.Member("alice", world.Config{}), w.Member("bob", world.Config{})
	for _, m := range []*world.Member{alice, bob} {
		if err := m.C.Start(w.Ctx); err != nil { // as an app runs it
			t.Fatal(err)
		}
	}
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Members: []string{bob.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	group = g.ID()
	bob.Sync()
	ids = map[string]uint64{}
	send := func(m *world.Member, text string) {
		t.Helper()
		seq, err := m.Conv(group).Send(w.Ctx, []byte(text))
		if err != nil {
			t.Fatalf("%s sends %q: %v", m.Name, text, err)
		}
		ids[text] = seq
	}
	send(alice, "one")
	world.SyncAll(alice, bob)
	kit.backup()
	send(alice, "two")
	send(bob, "three")
	world.SyncAll(alice, bob)
	kit.putBack(restoreMode)
	waitServing(t, alice)
	waitServing(t, bob)
	send(alice, "four")
	send(bob, "five")
	world.SyncAll(alice, bob)
	send(alice, "six")
	world.SyncAll(alice, bob)
	world.Agree(t, group, alice, bob)
	for _, m := range []*world.Member{alice, bob} {
		if st := m.ForkState(group); st == ports.ForkForked {
			t.Errorf("%s: forked after the restore", m.Name)
		}
		m.Tx(func(tx ports.Tx) error {
			entries, err := tx.LocalCommitLog().List(w.Ctx, group, 0, 0)
			for _, e := range entries {
				if e.CommitResult != ports.CommitResultApplied {
					t.Errorf("%s: commit-log entry %+v after the restore; every commit was merged", m.Name, e)
				}
			}
			return err
		})
		var got []string
		for _, msg := range heldMessages(t, m, group) {
			got = append(got, string(msg.Content))
		}
		slices.Sort(got)
		if want := []string{"five", "four", "one", "six", "three", "two"}; !slices.Equal(got, want) {
			t.Errorf("%s holds %q; want every message once, %q", m.Name, got, want)
		}
	}
	return alice, bob, group, ids
}

// COMP-460: restoring the documented backup and running restore mode, as
// docs/operations.md says, on a real regroupd with real clients: no
// sequence id is handed out twice (every id after the restore is above
// every id before it), and every member still reads and sends.
func TestCOMP460_RestoreModeIssuesNoIDTwice(t *testing.T) {
	for _, mode := range world.Networked {
		t.Run(mode, func(t *testing.T) {
			alice, bob, _, ids := restoreScenario(t, mode, true)
			before := max(ids["one"], ids["two"], ids["three"])
			// COMP-463: the restore deleted every key package; bob's client
			// publishes a new one by itself after its connection broke, and
			// a new group with him can be created again.
			var g2 *client.Conversation
			var err error
			for i := 0; i < 100; i++ {
				if g2, err = alice.C.CreateGroup(alice.W.Ctx, client.GroupOptions{Members: []string{bob.C.InboxID()}}); err == nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("a group with bob after the restore: %v", err)
			}
			bob.Sync()
			if _, err := bob.Conv(g2.ID()).Send(bob.W.Ctx, []byte("new group")); err != nil {
				t.Fatal(err)
			}
			for _, text := range []string{"four", "five", "six"} {
				if ids[text] <= before {
					t.Errorf("%q got id %d after the restore, not above %d handed out before it", text, ids[text], before)
				}
			}
			seen := map[uint64]string{}
			for text, id := range ids {
				if other, ok := seen[id]; ok {
					t.Errorf("id %d handed out twice: %q and %q", id, other, text)
				}
				seen[id] = text
			}
		})
	}
}

// COMP-466: a careless restore (the backup put back without restore
// mode) hands out ids that clients already hold; the clients lose no
// message and keep sending.
func TestCOMP466_CarelessRestoreLosesNoMessage(t *testing.T) {
	for _, mode := range world.Networked {
		t.Run(mode, func(t *testing.T) {
			_, _, _, ids := restoreScenario(t, mode, false)
			reissued := false
			for _, old := range []string{"two", "three"} {
				for _, text := range []string{"four", "five"} {
					reissued = reissued || ids[old] == ids[text]
				}
			}
			if !reissued {
				t.Fatalf("ids %v: the careless restore reissued no id, so the test proves nothing", ids)
			}
		})
	}
}
