package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/regroup-mls/regroup/core/algorithm"
	"github.com/regroup-mls/regroup/ports"
)

func faultySetup(t *testing.T, opts func(*Options)) (*Host, ports.WrapperAlgorithm, []byte) {
	t.Helper()
	o := quietOptions(selfPluginDir(t))
	if opts != nil {
		opts(o)
	}
	h := load(t, o)
	w := mustWrapper(t, h, faultyID)
	pub, _, err := w.GenerateKey(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return h, w, pub
}

func sealOK(t *testing.T, w ports.WrapperAlgorithm, pub []byte) {
	t.Helper()
	// A deadline of its own: the restart happens inside this call.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := w.Seal(ctx, pub, ports.WelcomeWrapperInfo(), []byte("welcome")); err != nil {
		t.Fatalf("Seal after recovery: %v", err)
	}
}

// TestErrorClassesCrossTheProcessBoundary: an implementation error of each
// ports class arrives on the host wrapping the same sentinel, over the
// in-process gRPC connection and from a subprocess.
func TestErrorClassesCrossTheProcessBoundary(t *testing.T) {
	hosts := map[string]*Host{
		"in-process gRPC": inProcessHost(t, faulty{}),
		"subprocess":      load(t, quietOptions(selfPluginDir(t))),
	}
	for name, h := range hosts {
		w := mustWrapper(t, h, faultyID)
		for i, class := range errorClasses {
			_, err := w.Seal(t.Context(), make([]byte, 32), nil, []byte("class:"+strconv.Itoa(i)))
			if !errors.Is(err, class) {
				t.Errorf("%s: class %v arrived as %v", name, class, err)
			}
			for j, other := range errorClasses {
				if j != i && errors.Is(err, other) {
					t.Errorf("%s: class %v also wraps %v", name, class, other)
				}
			}
			if !strings.Contains(err.Error(), "faulty plugin refuses") {
				t.Errorf("%s: plugin message lost: %v", name, err)
			}
		}
	}
}

// TestJOIN087UnservedIDAcrossPlugin: a call for an id the plugin does not
// serve arrives as ErrUnsupportedAlgorithm, so core holds the Welcome.
func TestJOIN087UnservedIDAcrossPlugin(t *testing.T) {
	h := inProcessHost(t, faulty{})
	w := &remoteWrapper{c: h.conns[0], id: 42, pubSize: 32, timeout: 30 * time.Second}
	if _, err := w.Seal(t.Context(), make([]byte, 32), nil, []byte("x")); !errors.Is(err, ports.ErrUnsupportedAlgorithm) {
		t.Fatalf("unserved id: %v, want ErrUnsupportedAlgorithm", err)
	}
	if _, err := h.Wrapper(42); !errors.Is(err, ports.ErrUnsupportedAlgorithm) {
		t.Fatalf("Host.Wrapper(42): %v", err)
	}
}

// TestCrashedPluginRestarts: a plugin that exits mid-call yields
// ErrAlgorithmUnavailable, the host keeps running, and the next call starts
// a fresh process.
func TestCrashedPluginRestarts(t *testing.T) {
	h, w, pub := faultySetup(t, nil)
	p := h.conns[0].(*process)
	before := p.gen
	_, err := w.Seal(t.Context(), pub, nil, []byte("crash"))
	if !errors.Is(err, ports.ErrAlgorithmUnavailable) {
		t.Fatalf("crash: %v, want ErrAlgorithmUnavailable", err)
	}
	sealOK(t, w, pub)
	if p.gen == before {
		t.Fatal("the call after a crash did not start a new process")
	}
}

// TestHungPluginHonoursDeadlineAndRestarts: a plugin that never answers
// yields ErrAlgorithmUnavailable wrapping context.DeadlineExceeded once the
// caller's deadline passes, and the next call runs on a fresh process.
func TestHungPluginHonoursDeadlineAndRestarts(t *testing.T) {
	h, w, pub := faultySetup(t, nil)
	p := h.conns[0].(*process)
	before := p.gen
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := w.Seal(ctx, pub, nil, []byte("hang"))
	if !errors.Is(err, ports.ErrAlgorithmUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hang: %v, want ErrAlgorithmUnavailable and DeadlineExceeded", err)
	}
	// A correctness bound, not a benchmark: the call must end with its
	// deadline, not wait on the plugin.
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("hung call returned after %v", d)
	}
	sealOK(t, w, pub)
	if p.gen == before {
		t.Fatal("the call after a hang did not start a new process")
	}
}

// TestCallWithoutDeadlineIsBounded: a ctx without deadline gets
// Options.CallTimeout.
func TestCallWithoutDeadlineIsBounded(t *testing.T) {
	_, w, pub := faultySetup(t, func(o *Options) { o.CallTimeout = 300 * time.Millisecond })
	_, err := w.Seal(context.Background(), pub, nil, []byte("hang"))
	if !errors.Is(err, ports.ErrAlgorithmUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hang without deadline: %v", err)
	}
	sealOK(t, w, pub)
}

// TestChecksumPinning: a pinned binary loads when its SHA-256 matches, is
// refused when it does not, and RequireChecksums refuses unpinned binaries.
func TestChecksumPinning(t *testing.T) {
	dir := exampleDir(t)
	name := BinaryPrefix + "xwing"
	sum, err := Checksum(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	o := quietOptions(dir)
	o.Checksums, o.RequireChecksums = map[string]string{name: sum}, true
	load(t, o)

	o.Checksums = map[string]string{name: strings.Repeat("00", 32)}
	if _, err := Load(t.Context(), o); !errors.Is(err, plugin.ErrChecksumsDoNotMatch) {
		t.Fatalf("wrong checksum: %v, want ErrChecksumsDoNotMatch", err)
	}
	o.Checksums = nil
	if _, err := Load(t.Context(), o); !errors.Is(err, ports.ErrInvalidInput) {
		t.Fatalf("unpinned with RequireChecksums: %v", err)
	}
	o.Checksums = map[string]string{name: "not hex"}
	if _, err := Load(t.Context(), o); !errors.Is(err, ports.ErrInvalidInput) {
		t.Fatalf("malformed checksum: %v", err)
	}
}

// TestDiscovery: only executable regular files named regroup-plugin-* are
// launched; a binary that is not a plugin fails Load without hanging it.
func TestDiscovery(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("README", "not a plugin", 0o755)
	write(BinaryPrefix+"disabled", "#!/bin/sh\nexit 1\n", 0o644)
	if err := os.Mkdir(filepath.Join(dir, BinaryPrefix+"dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := load(t, quietOptions(dir))
	if len(h.Plugins()) != 0 {
		t.Fatalf("loaded %+v", h.Plugins())
	}
	write(BinaryPrefix+"broken", "#!/bin/sh\nexit 1\n", 0o755)
	if _, err := Load(t.Context(), quietOptions(dir)); !errors.Is(err, ports.ErrAlgorithmUnavailable) {
		t.Fatalf("broken plugin: %v, want ErrAlgorithmUnavailable", err)
	}
	if _, err := Load(t.Context(), quietOptions("")); !errors.Is(err, ports.ErrInvalidInput) {
		t.Fatalf("no directory: %v", err)
	}
}

// TestCanceledLoad: Load honours its ctx.
func TestCanceledLoad(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Load(ctx, quietOptions(selfPluginDir(t))); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled Load: %v", err)
	}
}

// TestClosedHost: after Close, calls fail with ErrAlgorithmUnavailable and
// do not restart the plugin.
func TestClosedHost(t *testing.T) {
	h, w, pub := faultySetup(t, nil)
	h.Close()
	if _, err := w.Seal(t.Context(), pub, nil, []byte("x")); !errors.Is(err, ports.ErrAlgorithmUnavailable) {
		t.Fatalf("after Close: %v", err)
	}
}

// TestRegisterConflictsWithBuiltin: registering a plugin algorithm under an
// id a built-in holds fails and leaves the registry unchanged.
func TestRegisterConflictsWithBuiltin(t *testing.T) {
	h := inProcessHost(t, builtins()...)
	reg, err := algorithm.New(builtins()[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Register(reg); !errors.Is(err, algorithm.ErrAlreadyRegistered) {
		t.Fatalf("conflicting registration: %v", err)
	}
	if len(reg.Wrappers()) != 1 || len(reg.PointeeAEADs()) != 0 {
		t.Fatalf("registry changed: %v %v", reg.Wrappers(), reg.PointeeAEADs())
	}
}
