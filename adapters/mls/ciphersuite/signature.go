package ciphersuite

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
)

// GenerateSignatureKey returns a fresh signature key pair. For Ed25519 the
// private key is the 32-byte seed and the public key the 32-byte point; for
// ECDSA P-256 the 32-byte scalar and the 65-byte uncompressed point.
func (s *Suite) GenerateSignatureKey() (priv, pub []byte, err error) {
	switch s.r.sig {
	case ECDSASecp256r1SHA256:
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, fmt.Errorf("generate signature key: %w", err)
		}
		if priv, err = k.Bytes(); err != nil {
			return nil, nil, err
		}
		pub, err = k.PublicKey.Bytes()
		return priv, pub, err
	default:
		seed := make([]byte, ed25519.SeedSize)
		if _, err := rand.Read(seed); err != nil {
			return nil, nil, fmt.Errorf("generate signature key: %w", err)
		}
		pub, err = s.SignaturePublicKey(seed)
		return seed, pub, err
	}
}

// SignaturePublicKey returns the public key of a signature private key.
func (s *Suite) SignaturePublicKey(priv []byte) ([]byte, error) {
	if s.r.sig == ECDSASecp256r1SHA256 {
		k, err := ecdsaKey(priv)
		if err != nil {
			return nil, err
		}
		return k.PublicKey.Bytes()
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

func ecdsaKey(priv []byte) (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), priv)
	if err != nil {
		return nil, fmt.Errorf("%w: P-256 private key: %v", ErrInvalidKey, err)
	}
	return k, nil
}

// Sign signs msg with priv (the raw signature primitive; MLS structures use
// [Suite.SignWithLabel]). ECDSA signatures are DER-encoded over SHA-256.
func (s *Suite) Sign(priv, msg []byte) ([]byte, error) {
	if s.r.sig == ECDSASecp256r1SHA256 {
		k, err := ecdsaKey(priv)
		if err != nil {
			return nil, err
		}
		h := sha256.Sum256(msg)
		return ecdsa.SignASN1(rand.Reader, k, h[:])
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
	if s.r.sig == ECDSASecp256r1SHA256 {
		k, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), pub)
		if err != nil {
			return fmt.Errorf("%w: P-256 public key: %v", ErrInvalidKey, err)
		}
		h := sha256.Sum256(msg)
		if !ecdsa.VerifyASN1(k, h[:], sig) {
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
