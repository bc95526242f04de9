package ciphersuite

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"

	"github.com/cloudflare/circl/sign/ed448"
)

// ecdsaParams returns the curve and message digest of an ECDSA scheme;
// ok is false for Ed25519 and Ed448.
func ecdsaParams(sig SignatureScheme) (curve elliptic.Curve, digest func([]byte) []byte, ok bool) {
	switch sig {
	case ECDSASecp256r1SHA256:
		return elliptic.P256(), func(b []byte) []byte { h := sha256.Sum256(b); return h[:] }, true
	case ECDSASecp384r1SHA384:
		return elliptic.P384(), func(b []byte) []byte { h := sha512.Sum384(b); return h[:] }, true
	case ECDSASecp521r1SHA512:
		return elliptic.P521(), func(b []byte) []byte { h := sha512.Sum512(b); return h[:] }, true
	}
	return nil, nil, false
}

// GenerateSignatureKey returns a fresh signature key pair. For Ed25519 the
// private key is the 32-byte seed and the public key the 32-byte point; for
// ECDSA the raw scalar and the uncompressed point.
func (s *Suite) GenerateSignatureKey() (priv, pub []byte, err error) {
	if curve, _, ok := ecdsaParams(s.r.sig); ok {
		k, err := ecdsa.GenerateKey(curve, rand.Reader)
		if err != nil {
			return nil, nil, fmt.Errorf("generate signature key: %w", err)
		}
		if priv, err = k.Bytes(); err != nil {
			return nil, nil, err
		}
		pub, err = k.PublicKey.Bytes()
		return priv, pub, err
	}
	if s.r.sig == Ed448 {
		pub, priv, err := ed448.GenerateKey(rand.Reader)
		if err != nil {
			return nil, nil, fmt.Errorf("generate signature key: %w", err)
		}
		return append([]byte(nil), priv.Seed()...), append([]byte(nil), pub...), nil
	}
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return nil, nil, fmt.Errorf("generate signature key: %w", err)
	}
	pub, err = s.SignaturePublicKey(seed)
	return seed, pub, err
}

// SignaturePublicKey returns the public key of a signature private key.
func (s *Suite) SignaturePublicKey(priv []byte) ([]byte, error) {
	if curve, _, ok := ecdsaParams(s.r.sig); ok {
		k, err := ecdsaKey(curve, priv)
		if err != nil {
			return nil, err
		}
		return k.PublicKey.Bytes()
	}
	if s.r.sig == Ed448 {
		k, err := ed448Key(priv)
		if err != nil {
			return nil, err
		}
		return append([]byte(nil), k.Public().(ed448.PublicKey)...), nil
	}
	k, err := ed25519Key(priv)
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), k.Public().(ed25519.PublicKey)...), nil
}

func ed25519Key(priv []byte) (ed25519.PrivateKey, error) {
	switch len(priv) {
	case ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(priv), nil
	case ed25519.PrivateKeySize:
		return ed25519.PrivateKey(priv), nil
	default:
		return nil, fmt.Errorf("%w: Ed25519 private key of %d bytes", ErrInvalidKey, len(priv))
	}
}

// ed448Key accepts the 57-byte RFC 8032 seed or circl's 114-byte
// seed-and-public form.
func ed448Key(priv []byte) (ed448.PrivateKey, error) {
	switch len(priv) {
	case ed448.SeedSize:
		return ed448.NewKeyFromSeed(priv), nil
	case ed448.PrivateKeySize:
		k := ed448.NewKeyFromSeed(priv[:ed448.SeedSize])
		if !bytes.Equal(k, priv) {
			return nil, fmt.Errorf("%w: Ed448 private key whose public half does not match its seed", ErrInvalidKey)
		}
		return k, nil
	default:
		return nil, fmt.Errorf("%w: Ed448 private key of %d bytes", ErrInvalidKey, len(priv))
	}
}

func ecdsaKey(curve elliptic.Curve, priv []byte) (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.ParseRawPrivateKey(curve, leftPad(priv, (curve.Params().BitSize+7)/8))
	if err != nil {
		return nil, fmt.Errorf("%w: %s private key: %v", ErrInvalidKey, curve.Params().Name, err)
	}
	return k, nil
}

// Sign signs msg with priv (the raw signature primitive; MLS structures use
// [Suite.SignWithLabel]). ECDSA signatures are DER-encoded over the
// scheme's digest.
func (s *Suite) Sign(priv, msg []byte) ([]byte, error) {
	if curve, digest, ok := ecdsaParams(s.r.sig); ok {
		k, err := ecdsaKey(curve, priv)
		if err != nil {
			return nil, err
		}
		return ecdsa.SignASN1(rand.Reader, k, digest(msg))
	}
	if s.r.sig == Ed448 {
		k, err := ed448Key(priv)
		if err != nil {
			return nil, err
		}
		return ed448.Sign(k, msg, ""), nil // pure Ed448, empty context (RFC 8032 §5.2)
	}
	k, err := ed25519Key(priv)
	if err != nil {
		return nil, err
	}
	return ed25519.Sign(k, msg), nil
}

// Verify checks sig over msg under pub; a mismatch wraps ErrBadSignature
// and a malformed key ErrInvalidKey.
func (s *Suite) Verify(pub, msg, sig []byte) error {
	if curve, digest, ok := ecdsaParams(s.r.sig); ok {
		k, err := ecdsa.ParseUncompressedPublicKey(curve, pub)
		if err != nil {
			return fmt.Errorf("%w: %s public key: %v", ErrInvalidKey, curve.Params().Name, err)
		}
		if !ecdsa.VerifyASN1(k, digest(msg), sig) {
			return ErrBadSignature
		}
		return nil
	}
	if s.r.sig == Ed448 {
		if len(pub) != ed448.PublicKeySize {
			return fmt.Errorf("%w: Ed448 public key of %d bytes", ErrInvalidKey, len(pub))
		}
		if len(sig) != ed448.SignatureSize || !ed448.Verify(ed448.PublicKey(pub), msg, sig, "") {
			return ErrBadSignature
		}
		return nil
	}
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: Ed25519 public key of %d bytes", ErrInvalidKey, len(pub))
	}
	if !ed25519.Verify(ed25519.PublicKey(pub), msg, sig) {
		return ErrBadSignature
	}
	return nil
}
