package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/internal/testenv"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
)

// backupKit backs up and puts back the database of a world's regroupd the
// way docs/operations.md's "Backup and restore" says, with the tools it
// names (sqlite3, pg_dump, psql, pg_restore).
type backupKit struct {
	t      *testing.T
	mode   string
	r      *testenv.Regroupd
	dir    string
	vars   []string // DB, BACKUP and, on PostgreSQL, DSN and SCHEMA
	binDir string
}

func newBackupKit(t *testing.T, mode string, r *testenv.Regroupd) *backupKit {
	t.Helper()
	tools := []string{"sqlite3"}
	if mode == "postgres" {
		tools = []string{"pg_dump", "psql", "pg_restore"}
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed and CI=true: the backup-and-restore tests must run in CI", tool)
			}
			t.Skipf("%s is not installed: the backup-and-restore procedure needs it", tool)
		}
	}
	k := &backupKit{t: t, mode: mode, r: r, dir: t.TempDir(), binDir: filepath.Dir(testenv.RegroupdBinary(t))}
	if mode == "postgres" {
		k.vars = []string{"DSN=" + r.Flag("database"), "SCHEMA=" + r.Flag("postgres-schema"), "BACKUP=" + filepath.Join(k.dir, "regroupd.dump")}
	} else {
		k.vars = []string{"DB=" + r.Flag("database"), "BACKUP=" + filepath.Join(k.dir, "regroupd-backup.db")}
	}
	return k
}

// sh runs script with bash -euo pipefail, the kit's variables set and
// the test's regroupd first on PATH.
func (k *backupKit) sh(script string) string {
	k.t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = k.dir
	cmd.Env = append(os.Environ(), k.vars...)
	cmd.Env = append(cmd.Env, "PATH="+k.binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		k.t.Fatalf("%s\n%s: %v", script, out, err)
	}
	return string(out)
}

// step returns the commands of the numbered step of docs/operations.md's
// "Backup and restore" section for the kit's database (see docSteps).
func (k *backupKit) step(name string) string {
	k.t.Helper()
	steps := docSteps(k.t)
	db := "SQLite"
	if k.mode == "postgres" {
		db = "PostgreSQL"
	}
	script, ok := steps[db+" "+name]
	if !ok {
		k.t.Fatalf("docs/operations.md has no %q commands for %s (has %v)", name, db, mapKeys(steps))
	}
	return script
}

func mapKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// backup takes the backup while regroupd runs.
func (k *backupKit) backup() { k.t.Helper(); k.sh(k.step("backup")) }

// putBack stops regroupd, puts the backup back and, with restoreMode,
// runs `regroupd restore` as documented, then starts regroupd again.
// Without restoreMode it is the careless restore: the copy alone.
func (k *backupKit) putBack(restoreMode bool) {
	k.t.Helper()
	k.r.Kill()
	k.sh(k.step("put back"))
	if restoreMode {
		k.sh(k.step("restore mode"))
	}
	k.r.Start()
}

// docSteps reads the fenced sh blocks of docs/operations.md's "Backup and
// restore" section: each block's first line is a comment naming its
// database and step ("# SQLite: backup"), the rest its commands.
func docSteps(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(doc), "\n## Backup and restore\n")
	if !ok {
		t.Fatal(`docs/operations.md has no "## Backup and restore" section`)
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	steps := map[string]string{}
	for {
		_, rest, ok := strings.Cut(sec, "```sh\n")
		if !ok {
			break
		}
		block, after, _ := strings.Cut(rest, "```")
		sec = after
		// A block inside a list item is indented: the indentation is the
		// list's, not the commands'.
		lines := strings.Split(block, "\n")
		for i := range lines {
			lines[i] = strings.TrimLeft(lines[i], " ")
		}
		if name, ok := strings.CutPrefix(lines[0], "# "); ok {
			steps[strings.Replace(name, ":", "", 1)] = strings.Join(lines[1:], "\n")
		}
	}
	return steps
}

// waitServing syncs m until the restarted regroupd answers.
func waitServing(t *testing.T, m *world.Member) {
	t.Helper()
	var err error
	for i := 0; i < 100; i++ {
		if err = m.C.SyncAll(m.W.Ctx); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: regroupd not serving after the restore: %v", m.Name, err)
}

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
