package join_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/regroup-mls/regroup/adapters/aead"
	"github.com/regroup-mls/regroup/adapters/hpkewrap"
	"github.com/regroup-mls/regroup/core/algorithm"
	"github.com/regroup-mls/regroup/plugins/host"
	"github.com/regroup-mls/regroup/ports"
)

// faultyPlugin builds plugins/plugintest/faulty into a fresh plugin
// directory, loads it with a short call timeout, and returns a registry
// whose X-Wing wrapper the plugin process serves, and a function that
// sets what the plugin's Open does next.
func faultyPlugin(t *testing.T) (*algorithm.Registry, func(mode string)) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, host.BinaryPrefix+"faulty"),
		"github.com/regroup-mls/regroup/plugins/plugintest/faulty")
	cmd.Env = os.Environ()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build faulty plugin: %v\n%s", err, out)
	}
	h, err := host.Load(context.Background(), &host.Options{Dir: dir, Logger: hclog.NewNullLogger(), CallTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	reg, err := algorithm.New(hpkewrap.NewCurve25519(), aead.NewChaCha20Poly1305())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Register(reg); err != nil {
		t.Fatal(err)
	}
	set := func(mode string) {
		if err := os.WriteFile(filepath.Join(dir, "faulty-control"), []byte(mode), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return reg, set
}

// JOIN-085, JOIN-087, COMP-272: a wrapper plugin that fails while a
// Welcome is unwrapped never loses the Welcome. The joiner's X-Wing
// wrapper runs in a real plugin process: one that crashes, and one that
// hangs past the call timeout, leave the Welcome held for a retry
// (JOIN-085) and the host answering; one that returns different garbage
// at each call is at fault (JOIN-085); one that returns the same garbage
// each time is held as unreadable on JOIN-087's clock, not rejected.
// Each time the plugin is repaired, the held Welcome joins.
func TestJOIN085_PluginFailureKeepsTheWelcome(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("builds a plugin binary; run without -short")
	}
	t.Parallel()
	reg, set := faultyPlugin(t)
	w := newWorld(t, "sqlite")
	a := w.newInst("adder", instOptions{})
	for _, tc := range []struct{ mode, held string }{
		{"crash", "held JOIN-085"},
		{"hang", "held JOIN-085"},
		{"random", "held JOIN-085"},
		{"garbage", "held JOIN-087"},
	} {
		func() { // j.want fails the test, which owns the world
			j := w.newInst("joiner-"+tc.mode, instOptions{Registry: reg})
			set(tc.mode)
			_, seq := a.newGroup(groupSpec{}).join(j, addSpec{})
			for range 2 { // the first attempt, and a retry meeting the same fault
				err := j.rcv.Process(w.ctx)
				if err != nil && !errors.Is(err, ports.ErrAlgorithmUnavailable) {
					t.Fatalf("process under a plugin that does %q: %v", tc.mode, err)
				}
				j.want(seq, tc.held)
			}
			if tc.mode == "garbage" {
				hs, err := j.rcv.Held(w.ctx)
				if err != nil || len(hs) != 1 || hs[0].Deadline.IsZero() || !strings.Contains(hs[0].Reason, "plugin") {
					t.Fatalf("held %+v (%v); want one Welcome held on JOIN-087's clock, naming the plugin", hs, err)
				}
			}
			set("")
			j.retry()
			j.want(seq, "joined")
		}()
	}
}
