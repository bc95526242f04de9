package wrappertest

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/hpke"
	"fmt"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/internal/leak"
)

// StandardHPKE is an implementation of the port's sealed layout on the
// standard library's crypto/hpke (RFC 9180 base mode, empty aad). The
// suite uses it as the default reference of the wrapper ids whose HPKE
// suite crypto/hpke implements; its fields exist so that a test can build
// a wrapper that departs from the standard in one parameter.
type StandardHPKE struct {
	AlgorithmID ports.WrapperAlgorithmID
	KEM         hpke.KEM
	KDF         hpke.KDF
	AEAD        hpke.AEAD
	// AAD is the aad of every seal; the port fixes it empty.
	AAD []byte
}

// StandardReference returns the standard implementation of id:
// CURVE25519 is DHKEM(X25519), HKDF-SHA256, ChaCha20-Poly1305;
// [ports.WrapperXWingCanonical] is MLKEM768-X25519 (0x647A) with the same
// KDF and AEAD. It returns nil for other ids, among them
// XWING_MLKEM_768_DRAFT_6, whose KEM id 0x004D crypto/hpke does not
// implement: such a harness must declare Caps.Reference.
func StandardReference(id ports.WrapperAlgorithmID) *StandardHPKE {
	var kem hpke.KEM
	switch id {
	case ports.WrapperCurve25519:
		kem = hpke.DHKEM(ecdh.X25519())
	case ports.WrapperXWingCanonical:
		kem = hpke.MLKEM768X25519()
	default:
		return nil
	}
	return &StandardHPKE{AlgorithmID: id, KEM: kem, KDF: hpke.HKDFSHA256(), AEAD: hpke.ChaCha20Poly1305()}
}

var _ ports.WrapperAlgorithm = (*StandardHPKE)(nil)

// ID returns AlgorithmID.
func (s *StandardHPKE) ID() ports.WrapperAlgorithmID { return s.AlgorithmID }

// PublicKeySize returns the size of the KEM's public keys.
func (s *StandardHPKE) PublicKeySize() int {
	k, err := s.KEM.GenerateKey()
	if err != nil {
		return 0
	}
	return len(k.PublicKey().Bytes())
}

// GenerateKey returns a fresh key pair in the KEM's serialization.
func (s *StandardHPKE) GenerateKey(context.Context) (pub, priv []byte, err error) {
	k, err := s.KEM.GenerateKey()
	if err != nil {
		return nil, nil, err
	}
	priv, err = k.Bytes()
	return k.PublicKey().Bytes(), priv, err
}

// CheckPublicKey reports whether the KEM accepts pub.
func (s *StandardHPKE) CheckPublicKey(_ context.Context, pub []byte) error {
	if _, err := s.KEM.NewPublicKey(pub); err != nil {
		return fmt.Errorf("standard hpke: %w", ports.ErrInvalidKey)
	}
	return nil
}

// Seal seals plaintexts in order under one sender context.
func (s *StandardHPKE) Seal(_ context.Context, pub, info []byte, pts ...[]byte) ([][]byte, error) {
	if len(pts) == 0 {
		return nil, fmt.Errorf("standard hpke: %w", ports.ErrInvalidInput)
	}
	pk, err := s.KEM.NewPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("standard hpke: %w", ports.ErrInvalidKey)
	}
	enc, sender, err := hpke.NewSender(pk, s.KDF, s.AEAD, info)
	if err != nil {
		return nil, fmt.Errorf("standard hpke: %w", ports.ErrInvalidKey)
	}
	out := make([][]byte, len(pts))
	for i, pt := range pts {
		if out[i], err = sender.Seal(s.AAD, pt); err != nil {
			return nil, err
		}
	}
	out[0] = appendOpaque(appendOpaque(nil, enc), out[0])
	return out, nil
}

// Open opens sealed payloads under one recipient context.
func (s *StandardHPKE) Open(_ context.Context, priv, info []byte, sealed ...[]byte) ([][]byte, error) {
	if len(sealed) == 0 {
		return nil, fmt.Errorf("standard hpke: %w", ports.ErrInvalidInput)
	}
	enc, first, err := parseHPKECiphertext(sealed[0])
	if err != nil {
		return nil, fmt.Errorf("standard hpke: %w", ports.ErrCorrupt)
	}
	k, err := s.KEM.NewPrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("standard hpke: %w", ports.ErrInvalidKey)
	}
	r, err := hpke.NewRecipient(enc, k, s.KDF, s.AEAD, info)
	if err != nil {
		return nil, fmt.Errorf("standard hpke: %w", ports.ErrNotRecipient)
	}
	out := make([][]byte, len(sealed))
	for i, ct := range append([][]byte{first}, sealed[1:]...) {
		if out[i], err = r.Open(s.AAD, ct); err != nil {
			if i == 0 {
				return nil, fmt.Errorf("standard hpke: %w", ports.ErrNotRecipient)
			}
			return nil, fmt.Errorf("standard hpke: %w", ports.ErrCorrupt)
		}
	}
	return out, nil
}

// appendOpaque appends b as an RFC 9420 opaque<V> with a minimal prefix.
func appendOpaque(out, b []byte) []byte {
	n := len(b)
	switch {
	case n < 1<<6:
		out = append(out, byte(n))
	case n < 1<<14:
		out = append(out, 0x40|byte(n>>8), byte(n))
	default:
		out = append(out, 0x80|byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(out, b...)
}

// appendLongOpaque appends b with a prefix one size longer than needed,
// which RFC 9420 section 2.1.2 makes malformed.
func appendLongOpaque(out, b []byte) []byte {
	n := len(b)
	if n < 1<<6 {
		out = append(out, 0x40|byte(n>>8), byte(n))
	} else {
		out = append(out, 0x80|byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(out, b...)
}

// leaks reports how err's text shows secret, "" when it does not.
func leaks(err error, secret []byte) string { return leak.Find(err, secret) }

var secretText = bytes.Repeat([]byte("zq7VX2kLm9WpR4tB"), 8)

var standardCases = []testCase{
	{"Standard HPKE (crypto/hpke) opens what the algorithm seals, and back", func(e *env) {
		// Held to the standard whatever the harness declares: a wrapper
		// whose HPKE parameters (KDF, AEAD, aad, info, key schedule)
		// depart from RFC 9180 agrees with itself and fails here.
		std := StandardReference(e.alg.ID())
		e.needs(std != nil, fmt.Sprintf("a Reference: crypto/hpke implements no standard suite for %v", e.alg.ID()))
		pts := [][]byte{welcome, metadata, []byte("third")}
		pub, priv := e.keyPair()
		got, err := std.Open(e.ctx, priv, e.info, e.seal(pub, pts...)...)
		if err != nil || !equalAll(got, pts) {
			e.t.Fatalf("crypto/hpke cannot open what the algorithm sealed: %v", err)
		}
		spub, spriv, err := std.GenerateKey(e.ctx)
		if err != nil {
			e.t.Fatal(err)
		}
		ssealed, err := std.Seal(e.ctx, spub, e.info, pts...)
		if err != nil {
			e.t.Fatal(err)
		}
		if got := e.open(spriv, ssealed...); !equalAll(got, pts) {
			e.t.Fatal("the algorithm opened crypto/hpke's seal to other payloads")
		}
	}},
	{"Lax framing is ErrCorrupt", func(e *env) {
		// RFC 9420 section 2.1.2: a length in more bytes than needed is
		// malformed; sealed[0] is exactly one HpkeCiphertext.
		pub, priv := e.keyPair()
		sealed := e.seal(pub, welcome, metadata)
		enc, ct, err := parseHPKECiphertext(sealed[0])
		if err != nil {
			e.t.Fatalf("sealed[0] is not a TLS HpkeCiphertext: %v", err)
		}
		for name, framed := range map[string][]byte{
			"a byte appended":                    append(bytes.Clone(sealed[0]), 0),
			"kem_output length not minimal":      appendOpaque(appendLongOpaque(nil, enc), ct),
			"ciphertext length not minimal":      appendLongOpaque(appendOpaque(nil, enc), ct),
			"reserved 0b11 length prefix":        append([]byte{0xc0, 0, 0, 0, 0, 0, 0, byte(len(enc))}, sealed[0][1:]...),
			"kem_output length past the end":     append([]byte{0x7f, 0xff}, sealed[0][2:]...),
			"only the kem_output, no ciphertext": appendOpaque(nil, enc),
		} {
			s := clone(sealed)
			s[0] = framed
			_, err := e.alg.Open(e.ctx, priv, e.info, s...)
			e.wantClass("Open of sealed[0] with "+name, err, ports.ErrCorrupt)
		}
	}},
	{"Errors carry no plaintext or key", func(e *env) {
		pub, priv := e.keyPair()
		_, other := e.keyPair()
		sealed := e.seal(pub, secretText, secretText)
		flipped := clone(sealed)
		flipped[1][0] ^= 1
		checks := map[string]func() error{
			"Open under another key": func() error { _, err := e.alg.Open(e.ctx, other, e.info, sealed...); return err },
			"Open of a corrupt second payload": func() error {
				_, err := e.alg.Open(e.ctx, priv, e.info, flipped...)
				return err
			},
			"Open under a cut private key": func() error { _, err := e.alg.Open(e.ctx, priv[:len(priv)-1], e.info, sealed...); return err },
			"Seal to a cut public key": func() error {
				_, err := e.alg.Seal(e.ctx, pub[:len(pub)-1], e.info, secretText)
				return err
			},
		}
		for name, call := range checks {
			err := call()
			if err == nil {
				e.t.Errorf("%s: no error", name)
				continue
			}
			for what, secret := range map[string][]byte{"plaintext": secretText, "private key": priv, "other private key": other} {
				if how := leaks(err, secret); how != "" {
					e.t.Errorf("%s: the error shows the %s (%s): %v", name, what, how, err)
				}
			}
		}
	}},
}

var aliasCases = []testCase{
	{"Inputs are not modified and outputs are fresh", func(e *env) {
		pub, priv := e.keyPair()
		pts := [][]byte{bytes.Clone(welcome), bytes.Clone(metadata)}
		sealed := e.seal(pub, pts...)
		if !equalAll(pts, [][]byte{welcome, metadata}) {
			e.t.Fatal("Seal changed the caller's plaintexts")
		}
		kept := clone(sealed)
		got := e.open(priv, sealed...)
		if !equalAll(sealed, kept) {
			e.t.Fatal("Open changed the caller's sealed payloads")
		}
		for _, g := range got {
			if len(g) > 0 {
				g[0] ^= 0xff
			}
		}
		if !equalAll(sealed, kept) || !equalAll(pts, [][]byte{welcome, metadata}) {
			e.t.Fatal("the payloads Open returned share memory with the sealed payloads or the plaintexts")
		}
		if again := e.open(priv, sealed...); !equalAll(again, [][]byte{welcome, metadata}) {
			e.t.Fatal("a second Open of the same payloads returned other plaintexts")
		}
	}},
}
