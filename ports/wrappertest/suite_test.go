package wrappertest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/adapters/hpkewrap"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/wrappertest"
)

// brokenEnv selects the broken wrapper TestBrokenTarget runs the suite on.
const brokenEnv = "REGROUP_WRAPPERTEST_BROKEN"

// notRecipientAsCorrupt breaks the port contract: a wrong key reports
// ErrCorrupt instead of ErrNotRecipient.
type notRecipientAsCorrupt struct{ *hpkewrap.Curve25519 }

func (b notRecipientAsCorrupt) Open(ctx context.Context, priv, info []byte, sealed ...[]byte) ([][]byte, error) {
	pts, err := b.Curve25519.Open(ctx, priv, info, sealed...)
	if errors.Is(err, ports.ErrNotRecipient) {
		return nil, fmt.Errorf("open: %w", ports.ErrCorrupt)
	}
	return pts, err
}

// shortKey breaks JOIN-090: it advertises and generates 31-byte keys.
type shortKey struct{ *hpkewrap.Curve25519 }

func (shortKey) PublicKeySize() int { return 31 }

// acceptsAnyKey breaks JOIN-090: CheckPublicKey accepts low-order points.
type acceptsAnyKey struct{ *hpkewrap.Curve25519 }

func (acceptsAnyKey) CheckPublicKey(context.Context, []byte) error { return nil }

var broken = map[string]struct {
	alg      ports.WrapperAlgorithm
	mustFail string
}{
	"not-recipient": {notRecipientAsCorrupt{hpkewrap.NewCurve25519()}, "Wrong_key_is_ErrNotRecipient"},
	"short-key":     {shortKey{hpkewrap.NewCurve25519()}, "JOIN-090_public_key_size"},
	"any-key":       {acceptsAnyKey{hpkewrap.NewCurve25519()}, "JOIN-090_keys_on_which_sender_setup_fails_are_ErrInvalidKey"},
}

// TestBrokenTarget runs the suite on the broken wrapper brokenEnv names;
// it only runs as the child of TestSuiteFailsBrokenWrappers.
func TestBrokenTarget(t *testing.T) {
	name := os.Getenv(brokenEnv)
	if name == "" {
		t.Skip("runs only as the child of TestSuiteFailsBrokenWrappers")
	}
	wrappertest.Run(t, func(context.Context, *testing.T) (wrappertest.Harness, error) {
		return wrappertest.Static(broken[name].alg, wrappertest.Caps{PublicKeySize: 32,
			InvalidPublicKeys: [][]byte{make([]byte, 32)}}), nil
	})
}

// TestSuiteFailsBrokenWrappers: the suite fails, in the case that names the
// rule, for a wrapper that breaks that rule (and so catches it in any
// adapter).
func TestSuiteFailsBrokenWrappers(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range broken {
		cmd := exec.Command(exe, "-test.run=^TestBrokenTarget$", "-test.v")
		cmd.Env = append(os.Environ(), brokenEnv+"="+name)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("%s: the suite passed a broken wrapper", name)
			continue
		}
		if !strings.Contains(string(out), "--- FAIL: TestBrokenTarget/"+b.mustFail) {
			t.Errorf("%s: case %s did not fail:\n%s", name, b.mustFail, out)
		}
	}
}
