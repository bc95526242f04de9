package aeadtest

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/internal/leak"
)

// rfc8439 is the AEAD_CHACHA20_POLY1305 vector of RFC 8439 section 2.8.2,
// with associated data.
var rfc8439 = KnownAnswer{
	Name:      "RFC 8439 section 2.8.2",
	Key:       unhex("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"),
	Nonce:     unhex("070000004041424344454647"),
	AAD:       unhex("50515253c0c1c2c3c4c5c6c7"),
	Plaintext: []byte("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it."),
	Out: unhex("d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d63dbea45e8ca9671282fafb69da92728b1a71de0a9e060b2905d6a5b67ecd3b3692ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc3ff4def08e4b7a9de576d26586cec64b6116" +
		"1ae10b594f09e26a7e902ecbd0600691"),
}

func unhex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err) // constant input
	}
	return b
}

// standardVectors returns the published vectors of a wire AEAD id: an
// AEAD registered under a wire value is held to that value's standard
// whether or not its harness declares vectors.
func standardVectors(id ports.PointeeAEADID) []KnownAnswer {
	if id == ports.PointeeAEADChaCha20Poly1305 {
		return []KnownAnswer{rfc8439}
	}
	return nil
}

// standardReference returns an independent implementation of a wire AEAD
// id, nil for an id the suite knows no standard for.
func standardReference(id ports.PointeeAEADID) ports.PointeeAEAD {
	if id == ports.PointeeAEADChaCha20Poly1305 {
		return refChaCha{}
	}
	return nil
}

// refChaCha is RFC 8439 AEAD_CHACHA20_POLY1305 from golang.org/x/crypto.
type refChaCha struct{}

func (refChaCha) ID() ports.PointeeAEADID { return ports.PointeeAEADChaCha20Poly1305 }
func (refChaCha) KeySize() int            { return chacha20poly1305.KeySize }
func (refChaCha) NonceSize() int          { return chacha20poly1305.NonceSize }

func (refChaCha) Seal(_ context.Context, key, nonce, pt, aad []byte) ([]byte, error) {
	a, err := chacha20poly1305.New(key)
	if err != nil || len(nonce) != chacha20poly1305.NonceSize {
		return nil, fmt.Errorf("reference seal: %w", ports.ErrInvalidInput)
	}
	return a.Seal(nil, nonce, pt, aad), nil
}

func (refChaCha) Open(_ context.Context, key, nonce, ct, aad []byte) ([]byte, error) {
	a, err := chacha20poly1305.New(key)
	if err != nil || len(nonce) != chacha20poly1305.NonceSize {
		return nil, fmt.Errorf("reference open: %w", ports.ErrInvalidInput)
	}
	pt, err := a.Open(nil, nonce, ct, aad)
	if err != nil {
		return nil, fmt.Errorf("reference open: %w", ports.ErrCorrupt)
	}
	return pt, nil
}

// leaks reports how err's text shows secret, "" when it does not.
func leaks(err error, secret []byte) string { return leak.Find(err, secret) }

// secretText is a plaintext no error has reason to contain.
var secretText = bytes.Repeat([]byte("zq7VX2kLm9WpR4tB"), 8)

var standardCases = []testCase{
	{"JOIN-064 aad is bound to the ciphertext", func(e *env) {
		aad := []byte("associated data bound to this ciphertext, 57 bytes long.")
		ct := e.seal(e.key, e.nonce, pointee, aad)
		if got, err := e.a.Open(e.ctx, e.key, e.nonce, ct, aad); err != nil || !bytes.Equal(got, pointee) {
			e.t.Fatalf("Open under the sealing aad: %v", err)
		}
		flip := func(i int) []byte { b := bytes.Clone(aad); b[i] ^= 0x20; return b }
		for name, other := range map[string][]byte{
			"no aad": nil, "aad cut by one byte": aad[:len(aad)-1], "aad with a byte appended": append(bytes.Clone(aad), 0),
			"aad with its first byte changed": flip(0), "aad with its last byte changed": flip(len(aad) - 1),
			"aad with a middle byte changed": flip(len(aad) / 2), "another aad of the same length": bytes.Repeat([]byte{'a'}, len(aad)),
		} {
			_, err := e.a.Open(e.ctx, e.key, e.nonce, ct, other)
			e.wantClass("Open under "+name, err, ports.ErrCorrupt)
		}
		// Sealing under no aad and under an empty one agree (RFC 5116).
		if !bytes.Equal(e.seal(e.key, e.nonce, pointee, nil), e.seal(e.key, e.nonce, pointee, []byte{})) {
			e.t.Fatal("a nil aad and an empty aad seal differently")
		}
	}},
	{"JOIN-064 ciphertext with bytes appended is ErrCorrupt", func(e *env) {
		ct := e.seal(e.key, e.nonce, pointee, nil)
		for _, extra := range [][]byte{{0}, {0, 0, 0, 0}, ct[:16]} {
			_, err := e.a.Open(e.ctx, e.key, e.nonce, append(bytes.Clone(ct), extra...), nil)
			e.wantClass(fmt.Sprintf("Open of the ciphertext with %d bytes appended", len(extra)), err, ports.ErrCorrupt)
		}
	}},
	{"Errors carry no plaintext or key", func(e *env) {
		key, nonce := bytes.Repeat([]byte{0x5a, 0xc3, 0x17, 0x88}, e.a.KeySize()/4+1)[:e.a.KeySize()], e.nonce
		ct := e.seal(key, nonce, secretText, nil)
		bad := bytes.Clone(ct)
		bad[len(bad)-1] ^= 1
		checks := map[string]func() error{
			"Open of a forged tag": func() error { _, err := e.a.Open(e.ctx, key, nonce, bad, nil); return err },
			"Open under another aad": func() error {
				_, err := e.a.Open(e.ctx, key, nonce, ct, []byte("other"))
				return err
			},
			"Seal under a short nonce": func() error { _, err := e.a.Seal(e.ctx, key, nonce[:1], secretText, nil); return err },
			"Open under a short nonce": func() error { _, err := e.a.Open(e.ctx, key, nonce[:1], ct, nil); return err },
			"Seal under a long key": func() error {
				_, err := e.a.Seal(e.ctx, append(bytes.Clone(key), 0x5a), nonce, secretText, nil)
				return err
			},
		}
		for name, call := range checks {
			err := call()
			if err == nil {
				e.t.Errorf("%s: no error", name)
				continue
			}
			if how := leaks(err, secretText); how != "" {
				e.t.Errorf("%s: the error shows the plaintext (%s): %v", name, how, err)
			}
			if how := leaks(err, key); how != "" {
				e.t.Errorf("%s: the error shows the key (%s): %v", name, how, err)
			}
		}
	}},
}

var aliasCases = []testCase{
	{"Inputs are not modified and outputs are fresh", func(e *env) {
		key, nonce, pt, aad := bytes.Clone(e.key), bytes.Clone(e.nonce), bytes.Clone(pointee), []byte("aad")
		// Spare capacity invites an in-place seal over the caller's buffer.
		pt = append(make([]byte, 0, len(pt)+64), pt...)
		ct := e.seal(key, nonce, pt, aad)
		if !bytes.Equal(pt, pointee) || !bytes.Equal(key, e.key) || !bytes.Equal(nonce, e.nonce) || !bytes.Equal(aad, []byte("aad")) {
			e.t.Fatal("Seal changed its plaintext, key, nonce or aad")
		}
		sealed := bytes.Clone(ct)
		got, err := e.a.Open(e.ctx, key, nonce, ct, aad)
		if err != nil || !bytes.Equal(got, pointee) {
			e.t.Fatalf("Open: %v", err)
		}
		if !bytes.Equal(ct, sealed) {
			e.t.Fatal("Open changed the caller's ciphertext")
		}
		got[0] ^= 0xff
		if !bytes.Equal(ct, sealed) || !bytes.Equal(pt, pointee) {
			e.t.Fatal("the plaintext Open returned shares memory with its ciphertext or the sealed plaintext")
		}
	}},
}
