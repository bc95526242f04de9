package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// The identifiers plugins/plugintest/hostile serves.
const (
	hostileWrapperID = ports.LocalWrapperIDBase + 0x7e00
	hostileAEADID    = ports.PointeeAEADID(0x7e01)
)

var (
	hostileOnce sync.Once
	hostilePath string
	hostileErr  error
)

// hostileBinary builds plugins/plugintest/hostile once per test run.
func hostileBinary(t testing.TB) string {
	t.Helper()
	hostileOnce.Do(func() {
		hostilePath = filepath.Join(sharedTemp(t), "bin", "hostile")
		out, err := exec.Command("go", "build", "-o", hostilePath, "github.com/regroup-mls/regroup/plugins/plugintest/hostile").CombinedOutput()
		if err != nil {
			hostileErr = fmt.Errorf("go build plugins/plugintest/hostile: %v\n%s", err, out)
		}
	})
	if hostileErr != nil {
		t.Fatal(hostileErr)
	}
	return hostilePath
}

// hostileDir returns a fresh plugin directory holding the hostile plugin
// under each mode's name, and a fresh state directory its processes report
// to (REGROUP_HOSTILE_DIR, inherited by the plugins the test launches).
func hostileDir(t *testing.T, modes ...string) (dir, state string) {
	t.Helper()
	bin := hostileBinary(t)
	dir, state = t.TempDir(), t.TempDir()
	for _, m := range modes {
		if err := os.Symlink(bin, filepath.Join(dir, BinaryPrefix+m)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("REGROUP_HOSTILE_DIR", state)
	return dir, state
}

// loadHostile loads the hostile plugin in one mode and returns its wrapper
// and AEAD.
func loadHostile(t *testing.T, mode string, opts func(*Options)) (*Host, ports.WrapperAlgorithm, ports.PointeeAEAD, string) {
	t.Helper()
	dir, state := hostileDir(t, mode)
	o := quietOptions(dir)
	if opts != nil {
		opts(o)
	}
	h := load(t, o)
	a, err := h.PointeeAEAD(hostileAEADID)
	if err != nil {
		t.Fatal(err)
	}
	return h, mustWrapper(t, h, hostileWrapperID), a, state
}

// pids lists the processes of mode that reported what ("start", "hang").
func pids(t *testing.T, state, mode, what string) []int {
	t.Helper()
	entries, err := os.ReadDir(state)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		parts := strings.Split(e.Name(), ".")
		if len(parts) != 3 || parts[0] != mode || parts[2] != what {
			continue
		}
		pid, err := strconv.Atoi(parts[1])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, pid)
	}
	return out
}

// alive reports whether pid names a process (a zombie counts: nobody has
// waited for it).
func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// waitFor polls cond until it holds or a deadline generous for a loaded
// machine passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitPids waits until mode has reported what at least n times.
func waitPids(t *testing.T, state, mode, what string, n int) []int {
	t.Helper()
	var got []int
	waitFor(t, fmt.Sprintf("%d %s processes reporting %q", n, mode, what), 60*time.Second, func() bool {
		got = pids(t, state, mode, what)
		return len(got) >= n
	})
	return got
}

// pluginFault asserts that err reads as a plugin fault: the call may be
// retried (JOIN-085), and nothing says the input was bad.
func pluginFault(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ports.ErrAlgorithmUnavailable) {
		t.Errorf("%s: %v, want ErrAlgorithmUnavailable", what, err)
	}
	for _, c := range []error{ports.ErrInvalidInput, ports.ErrInvalidKey, ports.ErrCorrupt, ports.ErrNotRecipient, ports.ErrUnsupportedAlgorithm} {
		if errors.Is(err, c) {
			t.Errorf("%s: %v also reads as %v", what, err, c)
		}
	}
}

func longCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
