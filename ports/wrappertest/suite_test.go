package wrappertest_test

import (
	"bytes"
	"context"
	"crypto/hpke"
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

// infoSuffix seals and opens under the info with a byte appended: it
// agrees with itself and with no standard implementation.
type infoSuffix struct{ *hpkewrap.Curve25519 }

func (b infoSuffix) Seal(ctx context.Context, pub, info []byte, pts ...[]byte) ([][]byte, error) {
	return b.Curve25519.Seal(ctx, pub, append(bytes.Clone(info), '!'), pts...)
}

func (b infoSuffix) Open(ctx context.Context, priv, info []byte, sealed ...[]byte) ([][]byte, error) {
	return b.Curve25519.Open(ctx, priv, append(bytes.Clone(info), '!'), sealed...)
}

// laxFraming reads sealed[0] accepting lengths longer than needed and
// trailing bytes, then opens the re-encoded ciphertext.
type laxFraming struct{ *hpkewrap.Curve25519 }

func laxOpaque(b []byte) (v, rest []byte, ok bool) {
	if len(b) == 0 || b[0]>>6 == 3 {
		return nil, nil, false
	}
	size := 1 << (b[0] >> 6)
	if len(b) < size {
		return nil, nil, false
	}
	n := int(b[0] & 0x3f)
	for _, c := range b[1:size] {
		n = n<<8 | int(c)
	}
	if len(b)-size < n {
		return nil, nil, false
	}
	return b[size : size+n], b[size+n:], true
}

func (b laxFraming) Open(ctx context.Context, priv, info []byte, sealed ...[]byte) ([][]byte, error) {
	if len(sealed) > 0 {
		if enc, rest, ok := laxOpaque(sealed[0]); ok {
			if ct, _, ok := laxOpaque(rest); ok {
				if strict, err := hpkewrap.MarshalCiphertext(enc, ct); err == nil {
					sealed = append([][]byte{strict}, sealed[1:]...)
				}
			}
		}
	}
	return b.Curve25519.Open(ctx, priv, info, sealed...)
}

// privInError names the private key in its errors.
type privInError struct{ *hpkewrap.Curve25519 }

func (b privInError) Open(ctx context.Context, priv, info []byte, sealed ...[]byte) ([][]byte, error) {
	pts, err := b.Curve25519.Open(ctx, priv, info, sealed...)
	if err != nil {
		return nil, fmt.Errorf("open with private key %x: %w", priv, err)
	}
	return pts, nil
}

// plaintextInError quotes the payload it could not seal.
type plaintextInError struct{ *hpkewrap.Curve25519 }

func (b plaintextInError) Seal(ctx context.Context, pub, info []byte, pts ...[]byte) ([][]byte, error) {
	sealed, err := b.Curve25519.Seal(ctx, pub, info, pts...)
	if err != nil && len(pts) > 0 {
		return nil, fmt.Errorf("seal %q: %w", pts[0], err)
	}
	return sealed, err
}

// openInPlace decrypts each payload over the caller's sealed buffer.
type openInPlace struct{ *hpkewrap.Curve25519 }

func (b openInPlace) Open(ctx context.Context, priv, info []byte, sealed ...[]byte) ([][]byte, error) {
	pts, err := b.Curve25519.Open(ctx, priv, info, sealed...)
	if err != nil {
		return nil, err
	}
	for i := 1; i < len(pts); i++ {
		pts[i] = append(sealed[i][:0], pts[i]...)
	}
	return pts, nil
}

// departs returns the standard CURVE25519 wrapper with one parameter
// changed by change: it agrees with itself.
func departs(change func(s *wrappertest.StandardHPKE)) ports.WrapperAlgorithm {
	s := wrappertest.StandardReference(ports.WrapperCurve25519)
	change(s)
	return s
}

const standardCase = "Standard_HPKE_(crypto/hpke)_opens_what_the_algorithm_seals,_and_back"

// broken maps each saboteur to the cases that must fail on it, run with
// only the declarations the plugin guide shows.
var broken = map[string]struct {
	alg      ports.WrapperAlgorithm
	mustFail []string
}{
	"not-recipient":      {notRecipientAsCorrupt{hpkewrap.NewCurve25519()}, []string{"Wrong_key_is_ErrNotRecipient"}},
	"short-key":          {shortKey{hpkewrap.NewCurve25519()}, []string{"JOIN-090_public_key_size"}},
	"any-key":            {acceptsAnyKey{hpkewrap.NewCurve25519()}, []string{"JOIN-090_keys_on_which_sender_setup_fails_are_ErrInvalidKey"}},
	"info-suffix":        {infoSuffix{hpkewrap.NewCurve25519()}, []string{standardCase}},
	"nonempty-aad":       {departs(func(s *wrappertest.StandardHPKE) { s.AAD = []byte("regroup") }), []string{standardCase}},
	"sha384-kdf":         {departs(func(s *wrappertest.StandardHPKE) { s.KDF = hpke.HKDFSHA384() }), []string{standardCase}},
	"aes-gcm":            {departs(func(s *wrappertest.StandardHPKE) { s.AEAD = hpke.AES128GCM() }), []string{standardCase}},
	"lax-framing":        {laxFraming{hpkewrap.NewCurve25519()}, []string{"Lax_framing_is_ErrCorrupt"}},
	"priv-in-error":      {privInError{hpkewrap.NewCurve25519()}, []string{"Errors_carry_no_plaintext_or_key"}},
	"plaintext-in-error": {plaintextInError{hpkewrap.NewCurve25519()}, []string{"Errors_carry_no_plaintext_or_key"}},
	"open-in-place":      {openInPlace{hpkewrap.NewCurve25519()}, []string{"Inputs_are_not_modified_and_outputs_are_fresh"}},
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
		for _, c := range b.mustFail {
			if !strings.Contains(string(out), "--- FAIL: TestBrokenTarget/"+c+" ") {
				t.Errorf("%s: case %s did not fail:\n%s", name, c, out)
			}
		}
	}
}

// TestGuideListsEverySaboteur keeps docs/adapter-guide.md's table complete.
func TestGuideListsEverySaboteur(t *testing.T) {
	guide, err := os.ReadFile("../../docs/adapter-guide.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range broken {
		if !strings.Contains(string(guide), "`"+name+"`") {
			t.Errorf("docs/adapter-guide.md does not list saboteur %s", name)
		}
	}
}
