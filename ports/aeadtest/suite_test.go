package aeadtest_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
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

// aadLengthOnly authenticates only the length of the aad.
type aadLengthOnly struct{ aead.ChaCha20Poly1305 }

func (b aadLengthOnly) Seal(ctx context.Context, key, nonce, pt, aad []byte) ([]byte, error) {
	return b.ChaCha20Poly1305.Seal(ctx, key, nonce, pt, []byte(fmt.Sprint(len(aad))))
}

func (b aadLengthOnly) Open(ctx context.Context, key, nonce, ct, aad []byte) ([]byte, error) {
	return b.ChaCha20Poly1305.Open(ctx, key, nonce, ct, []byte(fmt.Sprint(len(aad))))
}

// aadPrefixOnly authenticates only the first 16 bytes of the aad.
type aadPrefixOnly struct{ aead.ChaCha20Poly1305 }

func first16(b []byte) []byte { return b[:min(len(b), 16)] }

func (b aadPrefixOnly) Seal(ctx context.Context, key, nonce, pt, aad []byte) ([]byte, error) {
	return b.ChaCha20Poly1305.Seal(ctx, key, nonce, pt, first16(aad))
}

func (b aadPrefixOnly) Open(ctx context.Context, key, nonce, ct, aad []byte) ([]byte, error) {
	return b.ChaCha20Poly1305.Open(ctx, key, nonce, ct, first16(aad))
}

// keyInError names the key in its errors.
type keyInError struct{ aead.ChaCha20Poly1305 }

func (b keyInError) Open(ctx context.Context, key, nonce, ct, aad []byte) ([]byte, error) {
	pt, err := b.ChaCha20Poly1305.Open(ctx, key, nonce, ct, aad)
	if err != nil {
		return nil, fmt.Errorf("open under key %x: %w", key, err)
	}
	return pt, nil
}

// plaintextInError quotes the plaintext it could not seal.
type plaintextInError struct{ aead.ChaCha20Poly1305 }

func (b plaintextInError) Seal(ctx context.Context, key, nonce, pt, aad []byte) ([]byte, error) {
	ct, err := b.ChaCha20Poly1305.Seal(ctx, key, nonce, pt, aad)
	if err != nil {
		return nil, fmt.Errorf("seal %q: %w", pt, err)
	}
	return ct, nil
}

// laxLength opens a ciphertext with trailing bytes by dropping them.
type laxLength struct{ aead.ChaCha20Poly1305 }

func (b laxLength) Open(ctx context.Context, key, nonce, ct, aad []byte) ([]byte, error) {
	pt, err := b.ChaCha20Poly1305.Open(ctx, key, nonce, ct, aad)
	for cut := 1; err != nil && cut <= 16 && cut < len(ct)-16; cut++ {
		pt, err = b.ChaCha20Poly1305.Open(ctx, key, nonce, ct[:len(ct)-cut], aad)
	}
	return pt, err
}

// reversedNonce uses the nonce bytes in reverse: it agrees with itself and
// with no one else.
type reversedNonce struct{ aead.ChaCha20Poly1305 }

func reverse(b []byte) []byte {
	out := bytes.Clone(b)
	slices.Reverse(out)
	return out
}

func (b reversedNonce) Seal(ctx context.Context, key, nonce, pt, aad []byte) ([]byte, error) {
	return b.ChaCha20Poly1305.Seal(ctx, key, reverse(nonce), pt, aad)
}

func (b reversedNonce) Open(ctx context.Context, key, nonce, ct, aad []byte) ([]byte, error) {
	return b.ChaCha20Poly1305.Open(ctx, key, reverse(nonce), ct, aad)
}

// tagFirst puts the tag before the ciphertext: self-consistent, not RFC 8439.
type tagFirst struct{ aead.ChaCha20Poly1305 }

func (b tagFirst) Seal(ctx context.Context, key, nonce, pt, aad []byte) ([]byte, error) {
	ct, err := b.ChaCha20Poly1305.Seal(ctx, key, nonce, pt, aad)
	if err != nil {
		return nil, err
	}
	return append(bytes.Clone(ct[len(ct)-16:]), ct[:len(ct)-16]...), nil
}

func (b tagFirst) Open(ctx context.Context, key, nonce, ct, aad []byte) ([]byte, error) {
	if len(ct) < 16 {
		return b.ChaCha20Poly1305.Open(ctx, key, nonce, ct, aad)
	}
	return b.ChaCha20Poly1305.Open(ctx, key, nonce, append(bytes.Clone(ct[16:]), ct[:16]...), aad)
}

// sealInPlace seals over the caller's plaintext buffer when it has room.
type sealInPlace struct{ aead.ChaCha20Poly1305 }

func (b sealInPlace) Seal(ctx context.Context, key, nonce, pt, aad []byte) ([]byte, error) {
	ct, err := b.ChaCha20Poly1305.Seal(ctx, key, nonce, pt, aad)
	if err != nil || cap(pt) < len(ct) {
		return ct, err
	}
	out := pt[:len(ct)]
	copy(out, ct)
	return out, nil
}

// openInPlace decrypts over the caller's ciphertext buffer.
type openInPlace struct{ aead.ChaCha20Poly1305 }

func (b openInPlace) Open(ctx context.Context, key, nonce, ct, aad []byte) ([]byte, error) {
	pt, err := b.ChaCha20Poly1305.Open(ctx, key, nonce, ct, aad)
	if err != nil {
		return nil, err
	}
	out := ct[:len(pt)]
	copy(out, pt)
	return out, nil
}

// broken maps each saboteur to the cases that must fail on it, run with
// only the declarations the plugin guide shows (sizes).
var broken = map[string]struct {
	a        ports.PointeeAEAD
	mustFail []string
}{
	"ignores-aad":        {ignoresAAD{}, []string{"JOIN-064_wrong_aad_is_ErrCorrupt", "JOIN-064_aad_is_bound_to_the_ciphertext", "Known_answers"}},
	"long-nonce":         {longNonce{}, []string{"JOIN-094_key_and_nonce_sizes"}},
	"aad-length-only":    {aadLengthOnly{}, []string{"JOIN-064_aad_is_bound_to_the_ciphertext", "Known_answers"}},
	"aad-prefix-only":    {aadPrefixOnly{}, []string{"JOIN-064_aad_is_bound_to_the_ciphertext"}},
	"key-in-error":       {keyInError{}, []string{"Errors_carry_no_plaintext_or_key"}},
	"plaintext-in-error": {plaintextInError{}, []string{"Errors_carry_no_plaintext_or_key"}},
	"trailing-bytes-ok":  {laxLength{}, []string{"JOIN-064_ciphertext_with_bytes_appended_is_ErrCorrupt"}},
	"reversed-nonce":     {reversedNonce{}, []string{"Known_answers", "Reference_implementation_interoperates_both_ways"}},
	"tag-first":          {tagFirst{}, []string{"Known_answers", "Reference_implementation_interoperates_both_ways"}},
	"seal-in-place":      {sealInPlace{}, []string{"Inputs_are_not_modified_and_outputs_are_fresh"}},
	"open-in-place":      {openInPlace{}, []string{"Inputs_are_not_modified_and_outputs_are_fresh"}},
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
