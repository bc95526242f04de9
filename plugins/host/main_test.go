package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/regroup-mls/regroup/adapters/aead"
	"github.com/regroup-mls/regroup/adapters/hpkewrap"
	"github.com/regroup-mls/regroup/adapters/pqwrap"
	"github.com/regroup-mls/regroup/plugins/sdk"
	"github.com/regroup-mls/regroup/ports"
)

// selfPluginEnv makes the test binary serve as a plugin: every built-in
// algorithm plus the faulty wrapper below.
const selfPluginEnv = "REGROUP_HOST_TEST_SELF_PLUGIN"

// faultyID is a local id (never on the wire) for the faulty wrapper.
const faultyID = ports.LocalWrapperIDBase + 0x7f00

// faulty is CURVE25519 under faultyID that misbehaves on request: the first
// plaintext "crash" exits the process, "hang" blocks forever ignoring ctx,
// and "class:<n>" returns an error of the n-th class of errorClasses.
type faulty struct{ *hpkewrap.Curve25519 }

func (faulty) ID() ports.WrapperAlgorithmID { return faultyID }

var errorClasses = []error{ports.ErrNotRecipient, ports.ErrUnsupportedAlgorithm, ports.ErrCorrupt,
	ports.ErrInvalidKey, ports.ErrInvalidInput, ports.ErrAlgorithmUnavailable}

func (f faulty) Seal(ctx context.Context, pub, info []byte, pts ...[]byte) ([][]byte, error) {
	if len(pts) > 0 {
		switch s := string(pts[0]); {
		case s == "crash":
			os.Exit(3)
		case s == "hang":
			select {}
		case len(s) == 7 && s[:6] == "class:":
			return nil, fmt.Errorf("faulty plugin refuses: %w", errorClasses[s[6]-'0'])
		}
	}
	return f.Curve25519.Seal(ctx, pub, info, pts...)
}

func builtins() []any {
	return []any{hpkewrap.NewCurve25519(), pqwrap.NewXWing(), pqwrap.NewXWingCanonical(), aead.NewChaCha20Poly1305()}
}

func TestMain(m *testing.M) {
	if os.Getenv(selfPluginEnv) == "1" {
		sdk.Serve(append(builtins(), faulty{hpkewrap.NewCurve25519()})...)
		return
	}
	code := m.Run()
	if tmpRoot != "" {
		os.RemoveAll(tmpRoot)
	}
	os.Exit(code)
}

var (
	tmpOnce sync.Once
	tmpRoot string
	tmpErr  error

	exampleOnce sync.Once
	examplePath string
	exampleErr  error
)

func sharedTemp(t testing.TB) string {
	tmpOnce.Do(func() { tmpRoot, tmpErr = os.MkdirTemp("", "regroup-host-test-") })
	if tmpErr != nil {
		t.Fatal(tmpErr)
	}
	return tmpRoot
}

// selfPluginDir returns a fresh directory holding a link to this test
// binary as a plugin, and arranges for the child to serve.
func selfPluginDir(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(exe, filepath.Join(dir, BinaryPrefix+"selftest")); err != nil {
		t.Fatal(err)
	}
	os.Setenv(selfPluginEnv, "1")
	return dir
}

// examplePlugin builds examples/plugin-xwing once per test run and returns
// its path.
func examplePlugin(t testing.TB) string {
	t.Helper()
	exampleOnce.Do(func() {
		examplePath = filepath.Join(sharedTemp(t), "bin", BinaryPrefix+"xwing")
		// go test puts its own toolchain first on PATH.
		out, err := exec.Command("go", "build", "-o", examplePath, "github.com/regroup-mls/regroup/examples/plugin-xwing").CombinedOutput()
		if err != nil {
			exampleErr = fmt.Errorf("go build examples/plugin-xwing: %v\n%s", err, out)
		}
	})
	if exampleErr != nil {
		t.Fatal(exampleErr)
	}
	return examplePath
}

// exampleDir returns a fresh plugin directory holding the example plugin.
func exampleDir(t testing.TB) string {
	t.Helper()
	bin := examplePlugin(t)
	dir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(dir, filepath.Base(bin))); err != nil {
		t.Fatal(err)
	}
	return dir
}

func quietOptions(dir string) *Options {
	return &Options{Dir: dir, Logger: hclog.NewNullLogger()}
}

func load(t testing.TB, opts *Options) *Host {
	t.Helper()
	h, err := Load(context.Background(), opts)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func mustWrapper(t testing.TB, h *Host, id ports.WrapperAlgorithmID) ports.WrapperAlgorithm {
	t.Helper()
	w, err := h.Wrapper(id)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

var _ = errors.Is
