package wrappertest

import (
	"bytes"

	"github.com/regroup-mls/regroup/ports"
)

var roundTripCases = []testCase{
	{"JOIN-071 round trip under the recipient key", func(e *env) {
		pub, priv := e.keyPair()
		got := e.open(priv, e.seal(pub, welcome)...)
		if !bytes.Equal(got[0], welcome) {
			e.t.Fatal("opened payload differs from the sealed one")
		}
	}},
	{"Empty plaintext round trips", func(e *env) {
		pub, priv := e.keyPair()
		got := e.open(priv, e.seal(pub, []byte{}, nil)...)
		if len(got[0]) != 0 || len(got[1]) != 0 {
			e.t.Fatalf("opened %q", got)
		}
	}},
	{"Welcome then WelcomeMetadata under one context", func(e *env) {
		// Companion definition: one context seals the Welcome, then the
		// WelcomeMetadata; more payloads follow in order.
		pub, priv := e.keyPair()
		pts := [][]byte{welcome, metadata, []byte("third"), []byte("fourth")}
		if got := e.open(priv, e.seal(pub, pts...)...); !equalAll(got, pts) {
			e.t.Fatalf("opened %d payloads that differ from the sealed ones", len(got))
		}
	}},
	{"A prefix of the payloads opens", func(e *env) {
		pub, priv := e.keyPair()
		sealed := e.seal(pub, welcome, metadata)
		if got := e.open(priv, sealed[0]); !bytes.Equal(got[0], welcome) {
			e.t.Fatal("first payload alone did not open to the Welcome")
		}
	}},
	{"Each seal encapsulates afresh", func(e *env) {
		pub, _ := e.keyPair()
		a, b := e.seal(pub, welcome), e.seal(pub, welcome)
		if bytes.Equal(a[0], b[0]) {
			e.t.Fatal("two seals of one plaintext to one key are identical")
		}
	}},
}

var rejectionCases = []testCase{
	{"Wrong key is ErrNotRecipient", func(e *env) {
		// Port contract; JOIN-076 makes the client pick the key by
		// hpke_public_key, and a wrong pick must say "not for me".
		pub, _ := e.keyPair()
		_, other := e.keyPair()
		_, err := e.alg.Open(e.ctx, other, e.info, e.seal(pub, welcome, metadata)...)
		e.wantClass("Open with another key", err, ports.ErrNotRecipient)
	}},
	{"Wrong info is ErrNotRecipient", func(e *env) {
		pub, priv := e.keyPair()
		sealed := e.seal(pub, welcome)
		for _, info := range [][]byte{nil, []byte("\x13MLS 1.0 MLS_WELCOMe\x00"), append(ports.WelcomeWrapperInfo(), 0)} {
			_, err := e.alg.Open(e.ctx, priv, info, sealed...)
			e.wantClass("Open under another info", err, ports.ErrNotRecipient)
		}
	}},
	{"Truncated ciphertexts are rejected", func(e *env) {
		pub, priv := e.keyPair()
		sealed := e.seal(pub, welcome, metadata)
		for _, n := range cuts(len(sealed[0])) {
			s := clone(sealed)
			s[0] = s[0][:n]
			_, err := e.alg.Open(e.ctx, priv, e.info, s...)
			e.wantClass("Open of first payload cut to "+itoa(n), err, ports.ErrCorrupt, ports.ErrNotRecipient)
		}
		for _, n := range cuts(len(sealed[1])) {
			s := clone(sealed)
			s[1] = s[1][:n]
			_, err := e.alg.Open(e.ctx, priv, e.info, s...)
			e.wantClass("Open of second payload cut to "+itoa(n), err, ports.ErrCorrupt)
		}
	}},
	{"Bit-flipped ciphertexts are rejected", func(e *env) {
		pub, priv := e.keyPair()
		sealed := e.seal(pub, welcome, metadata)
		for _, i := range positions(len(sealed[0])) {
			s := clone(sealed)
			s[0][i] ^= 0x01
			_, err := e.alg.Open(e.ctx, priv, e.info, s...)
			e.wantClass("Open with bit flipped in first payload at "+itoa(i), err, ports.ErrCorrupt, ports.ErrNotRecipient)
		}
		for _, i := range positions(len(sealed[1])) {
			s := clone(sealed)
			s[1][i] ^= 0x80
			_, err := e.alg.Open(e.ctx, priv, e.info, s...)
			e.wantClass("Open with bit flipped in second payload at "+itoa(i), err, ports.ErrCorrupt)
		}
	}},
	{"Reordered payloads are ErrCorrupt", func(e *env) {
		pub, priv := e.keyPair()
		sealed := e.seal(pub, welcome, metadata, []byte("third"))
		_, err := e.alg.Open(e.ctx, priv, e.info, sealed[0], sealed[2], sealed[1])
		e.wantClass("Open with payloads 1 and 2 swapped", err, ports.ErrCorrupt)
	}},
	{"No payload is ErrInvalidInput", func(e *env) {
		pub, priv := e.keyPair()
		_, err := e.alg.Seal(e.ctx, pub, e.info)
		e.wantClass("Seal of nothing", err, ports.ErrInvalidInput)
		_, err = e.alg.Open(e.ctx, priv, e.info)
		e.wantClass("Open of nothing", err, ports.ErrInvalidInput)
	}},
	{"Wrong-size keys are ErrInvalidKey", func(e *env) {
		pub, priv := e.keyPair()
		sealed := e.seal(pub, welcome)
		for _, n := range []int{0, len(pub) - 1, len(pub) + 1} {
			_, err := e.alg.Seal(e.ctx, make([]byte, n), e.info, welcome)
			e.wantClass("Seal to a "+itoa(n)+"-byte public key", err, ports.ErrInvalidKey)
			e.wantClass("CheckPublicKey of "+itoa(n)+" bytes", e.alg.CheckPublicKey(e.ctx, make([]byte, n)), ports.ErrInvalidKey)
		}
		for _, n := range []int{0, len(priv) - 1, len(priv) + 1} {
			_, err := e.alg.Open(e.ctx, make([]byte, n), e.info, sealed...)
			e.wantClass("Open with a "+itoa(n)+"-byte private key", err, ports.ErrInvalidKey)
		}
	}},
	{"JOIN-090 keys on which sender setup fails are ErrInvalidKey", func(e *env) {
		e.needs(len(e.caps.InvalidPublicKeys) > 0, "InvalidPublicKeys")
		for i, pub := range e.caps.InvalidPublicKeys {
			e.wantClass("CheckPublicKey of invalid key "+itoa(i), e.alg.CheckPublicKey(e.ctx, pub), ports.ErrInvalidKey)
			_, err := e.alg.Seal(e.ctx, pub, e.info, welcome)
			e.wantClass("Seal to invalid key "+itoa(i), err, ports.ErrInvalidKey)
		}
	}},
}

var sizeCases = []testCase{
	{"JOIN-090 public key size", func(e *env) {
		e.needs(e.caps.PublicKeySize > 0, "PublicKeySize")
		if got := e.alg.PublicKeySize(); got != e.caps.PublicKeySize {
			e.t.Fatalf("PublicKeySize() = %d, want %d", got, e.caps.PublicKeySize)
		}
		pub, _ := e.keyPair()
		if len(pub) != e.caps.PublicKeySize {
			e.t.Fatalf("generated public key is %d bytes, want %d", len(pub), e.caps.PublicKeySize)
		}
		if err := e.alg.CheckPublicKey(e.ctx, pub); err != nil {
			e.t.Fatalf("CheckPublicKey of a generated key: %v", err)
		}
	}},
	{"Private key size", func(e *env) {
		e.needs(e.caps.PrivateKeySize > 0, "PrivateKeySize")
		if _, priv := e.keyPair(); len(priv) != e.caps.PrivateKeySize {
			e.t.Fatalf("generated private key is %d bytes, want %d", len(priv), e.caps.PrivateKeySize)
		}
	}},
	{"Companion layout and ciphertext sizes", func(e *env) {
		e.needs(e.caps.HPKELayout, "HPKELayout")
		pub, _ := e.keyPair()
		sealed := e.seal(pub, welcome, metadata)
		enc, ct, err := parseHPKECiphertext(sealed[0])
		if err != nil {
			e.t.Fatalf("sealed[0] is not a TLS HpkeCiphertext: %v", err)
		}
		if len(enc) != e.caps.EncapsulatedKeySize {
			e.t.Errorf("kem_output is %d bytes, want %d", len(enc), e.caps.EncapsulatedKeySize)
		}
		if len(ct) != len(welcome)+e.caps.TagSize {
			e.t.Errorf("first ciphertext is %d bytes for a %d-byte plaintext, want tag %d", len(ct), len(welcome), e.caps.TagSize)
		}
		if len(sealed[1]) != len(metadata)+e.caps.TagSize {
			e.t.Errorf("second ciphertext is %d bytes for a %d-byte plaintext, want tag %d", len(sealed[1]), len(metadata), e.caps.TagSize)
		}
	}},
	{"ID is neither UNSPECIFIED nor SYMMETRIC_KEY", func(e *env) {
		if e.alg.ID() == ports.WrapperUnspecified || e.alg.ID() == ports.WrapperSymmetricKey {
			e.t.Fatalf("wrapper has id %v, which names no wrapper algorithm", e.alg.ID())
		}
	}},
}
