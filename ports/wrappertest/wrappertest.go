// Package wrappertest is the contract suite for [ports.WrapperAlgorithm].
//
// An adapter author implements [Harness] and calls [Run] from a test in the
// adapter's package:
//
//	func TestContract(t *testing.T) {
//		wrappertest.Run(t, func(ctx context.Context, t *testing.T) (wrappertest.Harness, error) {
//			return wrappertest.Static(mywrap.New(), wrappertest.Caps{PublicKeySize: 32}), nil
//		})
//	}
//
// Each case names the rule it checks. What a harness cannot offer it leaves
// out of its [Caps]; the cases that need it are skipped with the reason,
// never passed silently.
package wrappertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

// Caps declares what the harness's algorithm promises beyond the port
// contract, so that the suite can check it. A zero field disables the cases
// that need it.
type Caps struct {
	// PublicKeySize is the public key size the wire fixes for the algorithm
	// (32 for CURVE25519, 1,216 for X-Wing; JOIN-090).
	PublicKeySize int
	// PrivateKeySize is the size of the stored private key.
	PrivateKeySize int
	// HPKELayout declares the companion layout: sealed[0] is a TLS
	// HpkeCiphertext with a kem_output of EncapsulatedKeySize bytes, and
	// every ciphertext is its plaintext plus TagSize bytes.
	HPKELayout          bool
	EncapsulatedKeySize int
	TagSize             int
	// InvalidPublicKeys are public keys of the right size on which HPKE
	// sender setup fails; CheckPublicKey and Seal must reject them with
	// ErrInvalidKey (JOIN-090).
	InvalidPublicKeys [][]byte
	// Concurrent declares the algorithm safe for concurrent use.
	Concurrent bool
	// Reference is an independent implementation of the same algorithm
	// (for a plugin-hosted algorithm, the in-process one). Ciphertexts and
	// keys must cross between the two in both directions.
	Reference ports.WrapperAlgorithm
}

// Harness provides the algorithm under test.
type Harness interface {
	// Algorithm returns the implementation under test.
	Algorithm(ctx context.Context) (ports.WrapperAlgorithm, error)
	// Caps declares what the suite may check.
	Caps() Caps
	// Close releases what the harness holds.
	Close()
}

// HarnessMaker makes a fresh harness for one case.
type HarnessMaker func(ctx context.Context, t *testing.T) (Harness, error)

type static struct {
	alg  ports.WrapperAlgorithm
	caps Caps
}

func (s static) Algorithm(context.Context) (ports.WrapperAlgorithm, error) { return s.alg, nil }
func (s static) Caps() Caps                                                { return s.caps }
func (s static) Close()                                                    {}

// Static returns a harness that serves alg with caps and holds no resources.
func Static(alg ports.WrapperAlgorithm, caps Caps) Harness { return static{alg, caps} }

type env struct {
	t    *testing.T
	ctx  context.Context
	alg  ports.WrapperAlgorithm
	caps Caps
	info []byte
}

type testCase struct {
	name string
	run  func(e *env)
}

// Run runs every case of the suite against the harnesses newHarness makes.
func Run(t *testing.T, newHarness HarnessMaker) {
	t.Helper()
	cases := append(append([]testCase{}, roundTripCases...), rejectionCases...)
	cases = append(cases, sizeCases...)
	cases = append(cases, usageCases...)
	cases = append(cases, standardCases...)
	cases = append(cases, aliasCases...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			h, err := newHarness(ctx, t)
			if err != nil {
				t.Fatalf("make harness: %v", err)
			}
			defer h.Close()
			alg, err := h.Algorithm(ctx)
			if err != nil {
				t.Fatalf("harness algorithm: %v", err)
			}
			c.run(&env{t: t, ctx: ctx, alg: alg, caps: h.Caps(), info: ports.WelcomeWrapperInfo()})
		})
	}
}

func (e *env) keyPair() (pub, priv []byte) {
	e.t.Helper()
	pub, priv, err := e.alg.GenerateKey(e.ctx)
	if err != nil {
		e.t.Fatalf("GenerateKey: %v", err)
	}
	return pub, priv
}

func (e *env) seal(pub []byte, pts ...[]byte) [][]byte {
	e.t.Helper()
	sealed, err := e.alg.Seal(e.ctx, pub, e.info, pts...)
	if err != nil {
		e.t.Fatalf("Seal: %v", err)
	}
	if len(sealed) != len(pts) {
		e.t.Fatalf("Seal returned %d slices for %d plaintexts", len(sealed), len(pts))
	}
	return sealed
}

func (e *env) open(priv []byte, sealed ...[]byte) [][]byte {
	e.t.Helper()
	got, err := e.alg.Open(e.ctx, priv, e.info, sealed...)
	if err != nil {
		e.t.Fatalf("Open: %v", err)
	}
	return got
}

func (e *env) needs(ok bool, reason string) {
	e.t.Helper()
	if !ok {
		e.t.Skip("harness does not declare " + reason)
	}
}

// wantClass fails unless err wraps one of classes.
func (e *env) wantClass(what string, err error, classes ...error) {
	e.t.Helper()
	if err == nil {
		e.t.Fatalf("%s: no error, want %v", what, classes)
	}
	for _, c := range classes {
		if errors.Is(err, c) {
			return
		}
	}
	e.t.Fatalf("%s: error %q wraps none of %v", what, err, classes)
}

func equalAll(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func clone(b [][]byte) [][]byte {
	out := make([][]byte, len(b))
	for i := range b {
		out[i] = bytes.Clone(b[i])
	}
	return out
}

var (
	welcome  = bytes.Repeat([]byte("mls welcome "), 100)
	metadata = []byte("welcome metadata")
)

var usageCases = []testCase{
	{"Concurrent use from many goroutines", func(e *env) {
		e.needs(e.caps.Concurrent, "Concurrent")
		pub, priv := e.keyPair()
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 3 {
					pt := fmt.Appendf(nil, "goroutine %d message %d", g, i)
					sealed, err := e.alg.Seal(e.ctx, pub, e.info, pt, metadata)
					if err != nil {
						errs <- fmt.Errorf("seal: %w", err)
						return
					}
					got, err := e.alg.Open(e.ctx, priv, e.info, sealed...)
					if err != nil {
						errs <- fmt.Errorf("open: %w", err)
						return
					}
					if !bytes.Equal(got[0], pt) || !bytes.Equal(got[1], metadata) {
						errs <- fmt.Errorf("goroutine %d opened another payload", g)
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
	{"Canceled context is reported", func(e *env) {
		pub, priv := e.keyPair()
		sealed := e.seal(pub, welcome)
		ctx, cancel := context.WithCancel(e.ctx)
		cancel()
		if _, err := e.alg.Seal(ctx, pub, e.info, welcome); !errors.Is(err, context.Canceled) {
			e.t.Errorf("Seal with canceled ctx: %v, want context.Canceled", err)
		}
		if _, err := e.alg.Open(ctx, priv, e.info, sealed...); !errors.Is(err, context.Canceled) {
			e.t.Errorf("Open with canceled ctx: %v, want context.Canceled", err)
		}
	}},
	{"Reference implementation interoperates both ways", func(e *env) {
		e.needs(e.caps.Reference != nil, "a Reference implementation")
		ref := e.caps.Reference
		if ref.ID() != e.alg.ID() {
			e.t.Fatalf("reference id %v, algorithm id %v", ref.ID(), e.alg.ID())
		}
		pub, priv := e.keyPair()
		sealed := e.seal(pub, welcome, metadata)
		got, err := ref.Open(e.ctx, priv, e.info, sealed...)
		if err != nil || !equalAll(got, [][]byte{welcome, metadata}) {
			e.t.Fatalf("reference Open of the algorithm's seal: %v", err)
		}
		rpub, rpriv, err := ref.GenerateKey(e.ctx)
		if err != nil {
			e.t.Fatal(err)
		}
		rsealed, err := ref.Seal(e.ctx, rpub, e.info, welcome, metadata)
		if err != nil {
			e.t.Fatal(err)
		}
		if got := e.open(rpriv, rsealed...); !equalAll(got, [][]byte{welcome, metadata}) {
			e.t.Fatal("algorithm Open of the reference's seal returned other payloads")
		}
	}},
}
