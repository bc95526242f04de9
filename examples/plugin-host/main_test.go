package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/plugins/host"
)

// TestRunLoadsTheExamplePlugin is the guide's deployment walkthrough: build
// examples/plugin-xwing into a plugin directory, pin it, and load it into a
// registry beside the in-process built-ins.
func TestRunLoadsTheExamplePlugin(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, host.BinaryPrefix+"xwing")
	// go test puts its own toolchain first on PATH.
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/regroup-mls/regroup/examples/plugin-xwing").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, host.BinaryPrefix+"dangling")); err != nil {
		t.Fatal(err)
	}
	sum, err := host.Checksum(bin)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-dir", dir, "-pin", host.BinaryPrefix + "xwing=" + sum}, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"skipped regroup-plugin-dangling",
		"registry: wrappers [WELCOME_WRAPPER_ALGORITHM_CURVE25519 WELCOME_WRAPPER_ALGORITHM_XWING_MLKEM_768_DRAFT_6 LOCAL(0x647a)]",
		"WELCOME_WRAPPER_ALGORITHM_XWING_MLKEM_768_DRAFT_6: sealed and opened a Welcome",
		"LOCAL(0x647a): sealed and opened a Welcome",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// A wrong pin refuses the binary.
	if err := run(t.Context(), []string{"-dir", dir, "-pin", host.BinaryPrefix + "xwing=" + strings.Repeat("00", 32)}, &out); err == nil {
		t.Fatal("a wrong pin was accepted")
	}
}
