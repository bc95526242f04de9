package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/internal/testenv"
)

// The scripted walk-through of docs/getting-started.md runs as written:
// two homes over TLS to a real regroupd, a group, a message, a fork
// (diverge-after-merge) and its repair, each step checked by the script.
func TestGettingStartedWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("runs regroupd and the regroup binary")
	}
	for _, tool := range []string{"bash", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: the walk-through needs it", tool)
		}
	}
	b, err := os.ReadFile("../../docs/getting-started.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- walkthrough -->\n```sh\n")
	if !ok {
		t.Fatal("docs/getting-started.md has no walk-through block (<!-- walkthrough --> and a sh block)")
	}
	script, _, _ := strings.Cut(rest, "```")
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]string{"regroup": cliBinary(t), "regroupd": testenv.RegroupdBinary(t)} {
		if err := os.Symlink(src, filepath.Join(dir, "bin", name)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "walk-through done") {
		t.Fatalf("walk-through: %v\n%s", err, out)
	}
}
