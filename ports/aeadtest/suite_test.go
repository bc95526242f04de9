package aeadtest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/adapters/aead"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/aeadtest"
)

const brokenEnv = "REGROUP_AEADTEST_BROKEN"

// ignoresAAD breaks JOIN-064: it authenticates without the aad.
type ignoresAAD struct{ aead.ChaCha20Poly1305 }

func (b ignoresAAD) Seal(ctx context.Context, key, nonce, pt, _ []byte) ([]byte, error) {
	return b.ChaCha20Poly1305.Seal(ctx, key, nonce, pt, nil)
}

func (b ignoresAAD) Open(ctx context.Context, key, nonce, ct, _ []byte) ([]byte, error) {
	return b.ChaCha20Poly1305.Open(ctx, key, nonce, ct, nil)
}

// longNonce breaks JOIN-094's sizes: it claims a 24-byte nonce.
type longNonce struct{ aead.ChaCha20Poly1305 }

func (longNonce) NonceSize() int { return 24 }

var broken = map[string]struct {
	a        ports.PointeeAEAD
	mustFail string
}{
	"ignores-aad": {ignoresAAD{}, "JOIN-064_wrong_aad_is_ErrCorrupt"},
	"long-nonce":  {longNonce{}, "JOIN-094_key_and_nonce_sizes"},
}

// TestBrokenTarget runs the suite on the broken AEAD brokenEnv names; it
// only runs as the child of TestSuiteFailsBrokenAEADs.
func TestBrokenTarget(t *testing.T) {
	name := os.Getenv(brokenEnv)
	if name == "" {
		t.Skip("runs only as the child of TestSuiteFailsBrokenAEADs")
	}
	aeadtest.Run(t, func(context.Context, *testing.T) (aeadtest.Harness, error) {
		return aeadtest.Static(broken[name].a, aeadtest.Caps{KeySize: 32, NonceSize: 12, TagSize: 16}), nil
	})
}

// TestSuiteFailsBrokenAEADs: the suite fails, in the case that names the
// rule, for an AEAD that breaks it.
func TestSuiteFailsBrokenAEADs(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range broken {
		cmd := exec.Command(exe, "-test.run=^TestBrokenTarget$", "-test.v")
		cmd.Env = append(os.Environ(), brokenEnv+"="+name)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("%s: the suite passed a broken AEAD", name)
			continue
		}
		if !strings.Contains(string(out), "--- FAIL: TestBrokenTarget/"+b.mustFail) {
			t.Errorf("%s: case %s did not fail:\n%s", name, b.mustFail, out)
		}
	}
}
