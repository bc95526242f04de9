package ciphersuite

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
)

// GenerateSignatureKey returns a fresh signature key pair. For Ed25519 the
// private key is the 32-byte seed and the public key the 32-byte point.
func (s *Suite) GenerateSignatureKey() (priv, pub []byte, err error) {
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return nil, nil, fmt.Errorf("generate signature key: %w", err)
	}
	pub, err = s.SignaturePublicKey(seed)
	return seed, pub, err
}

// SignaturePublicKey returns the public key of a signature private key.
func (s *Suite) SignaturePublicKey(priv []byte) ([]byte, error) {
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

// Sign signs msg with priv (the raw signature primitive; MLS structures use
// [Suite.SignWithLabel]).
func (s *Suite) Sign(priv, msg []byte) ([]byte, error) {
	k, err := ed25519Key(priv)
	if err != nil {
		return nil, err
	}
	return ed25519.Sign(k, msg), nil
}

// Verify checks sig over msg under pub; a mismatch wraps ErrBadSignature
// and a malformed key ErrInvalidKey.
func (s *Suite) Verify(pub, msg, sig []byte) error {
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: Ed25519 public key of %d bytes", ErrInvalidKey, len(pub))
	}
	if !ed25519.Verify(ed25519.PublicKey(pub), msg, sig) {
		return ErrBadSignature
	}
	return nil
}
