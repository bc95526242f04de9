// Package hpkewrap implements the WELCOME_WRAPPER_ALGORITHM_CURVE25519 Welcome
// wrapper: HPKE base mode (RFC 9180) with DHKEM(X25519, HKDF-SHA256) 0x0020,
// HKDF-SHA256 0x0001 and ChaCha20-Poly1305 0x0003, on the standard library's
// crypto/hpke.
//
// It also holds the TLS framing every HPKE wrapper shares: [MarshalCiphertext]
// and [ParseCiphertext] for HpkeCiphertext, and [EncryptContext] for the info
// string.
//
// # Errors
//
// Open reports ports.ErrNotRecipient when the first payload does not
// authenticate (wrong key, wrong info or tampering, which a recipient cannot
// tell apart), ports.ErrCorrupt when the framing does not decode or a later
// payload does not authenticate, and ports.ErrInvalidKey for a private key
// that is not 32 bytes.
package hpkewrap

import (
	"context"
	"crypto/ecdh"
	"crypto/hpke"
	"fmt"

	"github.com/regroup-mls/regroup/ports"
)

// Sizes of the CURVE25519 wrapper.
const (
	// PublicKeySize is the size of an X25519 public key (JOIN-090).
	PublicKeySize = 32
	// PrivateKeySize is the size of a stored X25519 private key.
	PrivateKeySize = 32
	// EncapsulatedKeySize is the size of kem_output.
	EncapsulatedKeySize = 32
	// TagSize is the ChaCha20-Poly1305 tag each ciphertext carries.
	TagSize = 16
)

// Curve25519 is the WELCOME_WRAPPER_ALGORITHM_CURVE25519 wrapper. The zero
// value is not usable; call [NewCurve25519].
type Curve25519 struct {
	kem  hpke.KEM
	kdf  hpke.KDF
	aead hpke.AEAD
}

var _ ports.WrapperAlgorithm = (*Curve25519)(nil)

// NewCurve25519 returns the CURVE25519 wrapper. It is safe for concurrent use.
func NewCurve25519() *Curve25519 {
	return &Curve25519{
		kem:  hpke.DHKEM(ecdh.X25519()),
		kdf:  hpke.HKDFSHA256(),
		aead: hpke.ChaCha20Poly1305(),
	}
}

// ID returns ports.WrapperCurve25519.
func (c *Curve25519) ID() ports.WrapperAlgorithmID { return ports.WrapperCurve25519 }

// PublicKeySize returns 32.
func (c *Curve25519) PublicKeySize() int { return PublicKeySize }

// GenerateKey returns a fresh X25519 key pair, each 32 bytes.
func (c *Curve25519) GenerateKey(ctx context.Context) (pub, priv []byte, err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("generate curve25519 key: %w", err)
	}
	k, err := c.kem.GenerateKey()
	if err != nil {
		return nil, nil, fmt.Errorf("generate curve25519 key: %v", err)
	}
	priv, err = k.Bytes()
	if err != nil {
		return nil, nil, fmt.Errorf("generate curve25519 key: %v", err)
	}
	return k.PublicKey().Bytes(), priv, nil
}

func (c *Curve25519) publicKey(pub []byte) (hpke.PublicKey, error) {
	if len(pub) != PublicKeySize {
		return nil, fmt.Errorf("%w: curve25519 public key is %d bytes, want %d", ports.ErrInvalidKey, len(pub), PublicKeySize)
	}
	pk, err := c.kem.NewPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("%w: curve25519 public key: %v", ports.ErrInvalidKey, err)
	}
	return pk, nil
}

// CheckPublicKey runs an HPKE sender setup for pub and reports
// ports.ErrInvalidKey when it fails (wrong size, or a low-order point whose
// shared secret is all zeros; JOIN-090).
func (c *Curve25519) CheckPublicKey(ctx context.Context, pub []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("check curve25519 public key: %w", err)
	}
	pk, err := c.publicKey(pub)
	if err != nil {
		return fmt.Errorf("check curve25519 public key: %w", err)
	}
	if _, _, err := hpke.NewSender(pk, c.kdf, c.aead, nil); err != nil {
		return fmt.Errorf("check curve25519 public key: %w: sender setup: %v", ports.ErrInvalidKey, err)
	}
	return nil
}

// Seal seals plaintexts in order under one HPKE context to pub; see
// ports.WrapperAlgorithm for the layout.
func (c *Curve25519) Seal(ctx context.Context, pub, info []byte, plaintexts ...[]byte) ([][]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("seal curve25519 welcome: %w", err)
	}
	if len(plaintexts) == 0 {
		return nil, fmt.Errorf("seal curve25519 welcome: %w: no plaintext", ports.ErrInvalidInput)
	}
	pk, err := c.publicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("seal curve25519 welcome: %w", err)
	}
	enc, sender, err := hpke.NewSender(pk, c.kdf, c.aead, info)
	if err != nil {
		return nil, fmt.Errorf("seal curve25519 welcome: %w: sender setup: %v", ports.ErrInvalidKey, err)
	}
	out := make([][]byte, len(plaintexts))
	for i, pt := range plaintexts {
		ct, err := sender.Seal(nil, pt)
		if err != nil {
			return nil, fmt.Errorf("seal curve25519 welcome: payload %d: %w: %v", i, ports.ErrInvalidInput, err)
		}
		out[i] = ct
	}
	if out[0], err = MarshalCiphertext(enc, out[0]); err != nil {
		return nil, fmt.Errorf("seal curve25519 welcome: %w", err)
	}
	return out, nil
}

// Open opens sealed payloads addressed to priv; see the package
// documentation for the error classes.
func (c *Curve25519) Open(ctx context.Context, priv, info []byte, sealed ...[]byte) ([][]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open curve25519 welcome: %w", err)
	}
	if len(sealed) == 0 {
		return nil, fmt.Errorf("open curve25519 welcome: %w: no ciphertext", ports.ErrInvalidInput)
	}
	if len(priv) != PrivateKeySize {
		return nil, fmt.Errorf("open curve25519 welcome: %w: private key is %d bytes, want %d", ports.ErrInvalidKey, len(priv), PrivateKeySize)
	}
	sk, err := c.kem.NewPrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("open curve25519 welcome: %w: %v", ports.ErrInvalidKey, err)
	}
	enc, first, err := ParseCiphertext(sealed[0])
	if err != nil {
		return nil, fmt.Errorf("open curve25519 welcome: %w", err)
	}
	if len(enc) != EncapsulatedKeySize {
		return nil, fmt.Errorf("open curve25519 welcome: %w: kem_output is %d bytes, want %d", ports.ErrCorrupt, len(enc), EncapsulatedKeySize)
	}
	r, err := hpke.NewRecipient(enc, sk, c.kdf, c.aead, info)
	if err != nil {
		return nil, fmt.Errorf("open curve25519 welcome: %w: recipient setup: %v", ports.ErrCorrupt, err)
	}
	out := make([][]byte, len(sealed))
	if out[0], err = r.Open(nil, first); err != nil {
		return nil, fmt.Errorf("open curve25519 welcome: %w", ports.ErrNotRecipient)
	}
	for i := 1; i < len(sealed); i++ {
		if out[i], err = r.Open(nil, sealed[i]); err != nil {
			return nil, fmt.Errorf("open curve25519 welcome: payload %d: %w: authentication failed", i, ports.ErrCorrupt)
		}
	}
	return out, nil
}
