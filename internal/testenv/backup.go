package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// BackupKit backs up and puts back the database of a test's regroupd the
// way docs/operations.md's "Backup and restore" says, with the tools it
// names (sqlite3, pg_dump, psql, pg_restore): the end-to-end tests of a
// restore follow the documented procedure literally.
type BackupKit struct {
	t      testing.TB
	mode   string
	r      *Regroupd
	dir    string
	vars   []string // DB, BACKUP and, on PostgreSQL, DSN and SCHEMA
	binDir string
}

// NewBackupKit returns the kit of r, a regroupd on mode's database. It
// skips the test when a tool the procedure needs is not installed, and
// fails it instead with CI=true.
func NewBackupKit(t testing.TB, mode string, r *Regroupd) *BackupKit {
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
	k := &BackupKit{t: t, mode: mode, r: r, dir: t.TempDir(), binDir: filepath.Dir(RegroupdBinary(t))}
	if mode == "postgres" {
		k.vars = []string{"DSN=" + r.Flag("database"), "SCHEMA=" + r.Flag("postgres-schema"), "BACKUP=" + filepath.Join(k.dir, "regroupd.dump")}
	} else {
		k.vars = []string{"DB=" + r.Flag("database"), "BACKUP=" + filepath.Join(k.dir, "regroupd-backup.db")}
	}
	return k
}

// Sh runs script with bash -euo pipefail, the kit's variables set and
// the test's regroupd first on PATH, and returns its output.
func (k *BackupKit) Sh(script string) string {
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

// Step returns the commands of the named step of docs/operations.md's
// "Backup and restore" section for the kit's database (see DocSteps).
func (k *BackupKit) Step(name string) string {
	k.t.Helper()
	steps := DocSteps(k.t)
	db := "SQLite"
	if k.mode == "postgres" {
		db = "PostgreSQL"
	}
	script, ok := steps[db+" "+name]
	if !ok {
		var names []string
		for n := range steps {
			names = append(names, n)
		}
		slices.Sort(names)
		k.t.Fatalf("docs/operations.md has no %q commands for %s (has %v)", name, db, names)
	}
	return script
}

// Backup takes the backup while regroupd runs.
func (k *BackupKit) Backup() { k.t.Helper(); k.Sh(k.Step("backup")) }

// PutBack stops regroupd, puts the backup back and, with restoreMode,
// runs `regroupd restore` as documented, then starts regroupd again.
// Without restoreMode it is the careless restore: the copy alone.
func (k *BackupKit) PutBack(restoreMode bool) {
	k.t.Helper()
	k.r.Kill()
	k.Sh(k.Step("put back"))
	if restoreMode {
		k.Sh(k.Step("restore mode"))
	}
	k.r.Start()
}

// DocSteps reads the fenced sh blocks of docs/operations.md's "Backup and
// restore" section: each block's first line is a comment naming its
// database and step ("# SQLite: backup"), the rest its commands.
func DocSteps(t testing.TB) map[string]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs", "operations.md"))
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

// moduleRoot is the directory of the go.mod above the test's working
// directory (its package's directory).
func moduleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
