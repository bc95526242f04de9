// Package aeadtest is the contract suite for [ports.PointeeAEAD].
//
// An adapter author implements [Harness] (or uses [Static]) and calls [Run]
// from a test in the adapter's package. Each case names the rule it checks;
// a capability the harness does not declare in [Caps] skips the cases that
// need it, with the reason.
package aeadtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

// KnownAnswer is one published test vector for the AEAD.
type KnownAnswer struct {
	Name                            string
	Key, Nonce, AAD, Plaintext, Out []byte // Out is ciphertext || tag
}

// Caps declares what the harness's AEAD promises beyond the port contract.
type Caps struct {
	// KeySize, NonceSize and TagSize are the sizes the wire fixes for the
	// aead_type (32, 12 and 16 for CHACHA20_POLY1305; JOIN-078, JOIN-094).
	KeySize, NonceSize, TagSize int
	// KnownAnswers are published vectors the AEAD must reproduce.
	KnownAnswers []KnownAnswer
	// Concurrent declares the AEAD safe for concurrent use.
	Concurrent bool
	// Reference is an independent implementation of the same AEAD (for a
	// plugin-hosted one, the in-process one).
	Reference ports.PointeeAEAD
}

// Harness provides the AEAD under test.
type Harness interface {
	// AEAD returns the implementation under test.
	AEAD(ctx context.Context) (ports.PointeeAEAD, error)
	// Caps declares what the suite may check.
	Caps() Caps
	// Close releases what the harness holds.
	Close()
}

// HarnessMaker makes a fresh harness for one case.
type HarnessMaker func(ctx context.Context, t *testing.T) (Harness, error)

type static struct {
	a    ports.PointeeAEAD
	caps Caps
}

func (s static) AEAD(context.Context) (ports.PointeeAEAD, error) { return s.a, nil }
func (s static) Caps() Caps                                      { return s.caps }
func (s static) Close()                                          {}

// Static returns a harness that serves a with caps and holds no resources.
func Static(a ports.PointeeAEAD, caps Caps) Harness { return static{a, caps} }

type env struct {
	t          *testing.T
	ctx        context.Context
	a          ports.PointeeAEAD
	caps       Caps
	key, nonce []byte
}

func (e *env) needs(ok bool, reason string) {
	e.t.Helper()
	if !ok {
		e.t.Skip("harness does not declare " + reason)
	}
}

func (e *env) seal(key, nonce, pt, aad []byte) []byte {
	e.t.Helper()
	ct, err := e.a.Seal(e.ctx, key, nonce, pt, aad)
	if err != nil {
		e.t.Fatalf("Seal: %v", err)
	}
	return ct
}

func (e *env) wantClass(what string, err error, class error) {
	e.t.Helper()
	if !errors.Is(err, class) {
		e.t.Fatalf("%s: %v, want an error wrapping %v", what, err, class)
	}
}

func random(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

var pointee = bytes.Repeat([]byte("welcome pointee "), 64)

type testCase struct {
	name string
	run  func(e *env)
}

// Run runs every case of the suite against the harnesses newHarness makes.
func Run(t *testing.T, newHarness HarnessMaker) {
	t.Helper()
	for _, c := range append(append(append([]testCase{}, cases...), standardCases...), aliasCases...) {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			h, err := newHarness(ctx, t)
			if err != nil {
				t.Fatalf("make harness: %v", err)
			}
			defer h.Close()
			a, err := h.AEAD(ctx)
			if err != nil {
				t.Fatalf("harness AEAD: %v", err)
			}
			c.run(&env{t: t, ctx: ctx, a: a, caps: h.Caps(), key: random(a.KeySize()), nonce: random(a.NonceSize())})
		})
	}
}

var cases = []testCase{
	{"JOIN-078 round trip", func(e *env) {
		ct := e.seal(e.key, e.nonce, pointee, nil)
		got, err := e.a.Open(e.ctx, e.key, e.nonce, ct, nil)
		if err != nil || !bytes.Equal(got, pointee) {
			e.t.Fatalf("Open: %v", err)
		}
		if ct2 := e.seal(e.key, e.nonce, []byte{}, nil); len(ct2) == 0 {
			e.t.Fatal("empty plaintext sealed to nothing: no tag")
		}
	}},
	{"JOIN-094 key and nonce sizes", func(e *env) {
		e.needs(e.caps.KeySize > 0 && e.caps.NonceSize > 0, "KeySize and NonceSize")
		if e.a.KeySize() != e.caps.KeySize || e.a.NonceSize() != e.caps.NonceSize {
			e.t.Fatalf("sizes key %d nonce %d, want %d and %d", e.a.KeySize(), e.a.NonceSize(), e.caps.KeySize, e.caps.NonceSize)
		}
	}},
	{"Ciphertext is plaintext plus tag", func(e *env) {
		e.needs(e.caps.TagSize > 0, "TagSize")
		if ct := e.seal(e.key, e.nonce, pointee, nil); len(ct) != len(pointee)+e.caps.TagSize {
			e.t.Fatalf("ciphertext %d bytes for %d-byte plaintext", len(ct), len(pointee))
		}
	}},
	{"JOIN-064 wrong key is ErrCorrupt", func(e *env) {
		ct := e.seal(e.key, e.nonce, pointee, nil)
		_, err := e.a.Open(e.ctx, random(e.a.KeySize()), e.nonce, ct, nil)
		e.wantClass("Open under another key", err, ports.ErrCorrupt)
	}},
	{"JOIN-064 wrong nonce is ErrCorrupt", func(e *env) {
		// JOIN-065: data and welcome_metadata use different nonces, so
		// opening one with the other's nonce must fail.
		ct := e.seal(e.key, e.nonce, pointee, nil)
		_, err := e.a.Open(e.ctx, e.key, random(e.a.NonceSize()), ct, nil)
		e.wantClass("Open under another nonce", err, ports.ErrCorrupt)
	}},
	{"JOIN-064 wrong aad is ErrCorrupt", func(e *env) {
		ct := e.seal(e.key, e.nonce, pointee, nil)
		_, err := e.a.Open(e.ctx, e.key, e.nonce, ct, []byte("x"))
		e.wantClass("Open under another aad", err, ports.ErrCorrupt)
	}},
	{"JOIN-064 truncated ciphertext is ErrCorrupt", func(e *env) {
		ct := e.seal(e.key, e.nonce, pointee, nil)
		for _, n := range []int{0, 1, 15, 16, len(ct) / 2, len(ct) - 1} {
			_, err := e.a.Open(e.ctx, e.key, e.nonce, ct[:n], nil)
			e.wantClass(fmt.Sprintf("Open of ciphertext cut to %d", n), err, ports.ErrCorrupt)
		}
	}},
	{"JOIN-064 bit-flipped ciphertext is ErrCorrupt", func(e *env) {
		ct := e.seal(e.key, e.nonce, pointee, nil)
		for _, i := range []int{0, 1, len(ct) / 2, len(ct) - 17, len(ct) - 16, len(ct) - 1} {
			c := bytes.Clone(ct)
			c[i] ^= 0x04
			_, err := e.a.Open(e.ctx, e.key, e.nonce, c, nil)
			e.wantClass(fmt.Sprintf("Open with bit flipped at %d", i), err, ports.ErrCorrupt)
		}
	}},
	{"Wrong-size key is ErrInvalidKey", func(e *env) {
		for _, n := range []int{0, e.a.KeySize() - 1, e.a.KeySize() + 1} {
			_, err := e.a.Seal(e.ctx, make([]byte, n), e.nonce, pointee, nil)
			e.wantClass(fmt.Sprintf("Seal under a %d-byte key", n), err, ports.ErrInvalidKey)
			_, err = e.a.Open(e.ctx, make([]byte, n), e.nonce, pointee, nil)
			e.wantClass(fmt.Sprintf("Open under a %d-byte key", n), err, ports.ErrInvalidKey)
		}
	}},
	{"Wrong-size nonce is ErrInvalidInput", func(e *env) {
		for _, n := range []int{0, e.a.NonceSize() - 1, e.a.NonceSize() + 1} {
			_, err := e.a.Seal(e.ctx, e.key, make([]byte, n), pointee, nil)
			e.wantClass(fmt.Sprintf("Seal under a %d-byte nonce", n), err, ports.ErrInvalidInput)
			_, err = e.a.Open(e.ctx, e.key, make([]byte, n), pointee, nil)
			e.wantClass(fmt.Sprintf("Open under a %d-byte nonce", n), err, ports.ErrInvalidInput)
		}
	}},
	{"Known answers", func(e *env) {
		// The published vectors of a wire id apply whatever the harness
		// declares; declared vectors come on top.
		vectors := append(standardVectors(e.a.ID()), e.caps.KnownAnswers...)
		e.needs(len(vectors) > 0, "KnownAnswers, and the suite knows no published vectors for "+e.a.ID().String())
		for _, ka := range vectors {
			if got := e.seal(ka.Key, ka.Nonce, ka.Plaintext, ka.AAD); !bytes.Equal(got, ka.Out) {
				e.t.Errorf("%s: Seal = %x, want %x", ka.Name, got, ka.Out)
			}
			if got, err := e.a.Open(e.ctx, ka.Key, ka.Nonce, ka.Out, ka.AAD); err != nil || !bytes.Equal(got, ka.Plaintext) {
				e.t.Errorf("%s: Open: %v", ka.Name, err)
			}
		}
	}},
	{"Canceled context is reported", func(e *env) {
		ctx, cancel := context.WithCancel(e.ctx)
		cancel()
		if _, err := e.a.Seal(ctx, e.key, e.nonce, pointee, nil); !errors.Is(err, context.Canceled) {
			e.t.Errorf("Seal with canceled ctx: %v", err)
		}
		if _, err := e.a.Open(ctx, e.key, e.nonce, pointee, nil); !errors.Is(err, context.Canceled) {
			e.t.Errorf("Open with canceled ctx: %v", err)
		}
	}},
	{"Concurrent use from many goroutines", func(e *env) {
		e.needs(e.caps.Concurrent, "Concurrent")
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key, nonce, pt := random(e.a.KeySize()), random(e.a.NonceSize()), fmt.Appendf(nil, "pointee %d", g)
				for range 3 {
					ct, err := e.a.Seal(e.ctx, key, nonce, pt, nil)
					if err != nil {
						errs <- err
						return
					}
					got, err := e.a.Open(e.ctx, key, nonce, ct, nil)
					if err != nil || !bytes.Equal(got, pt) {
						errs <- fmt.Errorf("goroutine %d: open %q, %v", g, got, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			e.t.Error(err)
		}
	}},
	{"Reference implementation interoperates both ways", func(e *env) {
		// A wire id's standard implementation is the reference unless the
		// harness declares another.
		ref := e.caps.Reference
		if ref == nil {
			ref = standardReference(e.a.ID())
		}
		e.needs(ref != nil, "a Reference implementation, and the suite knows no standard one for "+e.a.ID().String())
		if ref.ID() != e.a.ID() {
			e.t.Fatalf("reference id %v, AEAD id %v", ref.ID(), e.a.ID())
		}
		aad := []byte("reference aad")
		for _, ad := range [][]byte{nil, aad} {
			ct := e.seal(e.key, e.nonce, pointee, ad)
			if got, err := ref.Open(e.ctx, e.key, e.nonce, ct, ad); err != nil || !bytes.Equal(got, pointee) {
				e.t.Fatalf("reference Open (aad %q): %v", ad, err)
			}
			rct, err := ref.Seal(e.ctx, e.key, e.nonce, pointee, ad)
			if err != nil || !bytes.Equal(rct, ct) {
				e.t.Fatalf("reference Seal (aad %q) differs: %v", ad, err)
			}
		}
	}},
}
