// Package aead implements the pointee AEADs of welcome pointers:
// WELCOME_POINTEE_ENCRYPTION_AEAD_TYPE_CHACHA20_POLY1305 (RFC 8439) with a
// 32-byte key, a 12-byte nonce and a 16-byte tag (JOIN-078).
//
// # Errors
//
// Open reports ports.ErrCorrupt for a ciphertext that fails authentication
// (JOIN-064); a key of the wrong size is ports.ErrInvalidKey and a nonce of
// the wrong size is ports.ErrInvalidInput.
package aead

import (
	"context"
	"fmt"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/regroup-mls/regroup/ports"
)

// Sizes of the ChaCha20-Poly1305 pointee AEAD.
const (
	KeySize   = chacha20poly1305.KeySize
	NonceSize = chacha20poly1305.NonceSize
	TagSize   = chacha20poly1305.Overhead
)

// ChaCha20Poly1305 is the CHACHA20_POLY1305 pointee AEAD. It holds no
// state and is safe for concurrent use.
type ChaCha20Poly1305 struct{}

var _ ports.PointeeAEAD = ChaCha20Poly1305{}

// NewChaCha20Poly1305 returns the CHACHA20_POLY1305 pointee AEAD.
func NewChaCha20Poly1305() ChaCha20Poly1305 { return ChaCha20Poly1305{} }

// ID returns ports.PointeeAEADChaCha20Poly1305.
func (ChaCha20Poly1305) ID() ports.PointeeAEADID { return ports.PointeeAEADChaCha20Poly1305 }

// KeySize returns 32.
func (ChaCha20Poly1305) KeySize() int { return KeySize }

// NonceSize returns 12.
func (ChaCha20Poly1305) NonceSize() int { return NonceSize }

func check(key, nonce []byte) error {
	if len(key) != KeySize {
		return fmt.Errorf("%w: key is %d bytes, want %d", ports.ErrInvalidKey, len(key), KeySize)
	}
	if len(nonce) != NonceSize {
		return fmt.Errorf("%w: nonce is %d bytes, want %d", ports.ErrInvalidInput, len(nonce), NonceSize)
	}
	return nil
}

// Seal encrypts plaintext and appends the 16-byte tag.
func (ChaCha20Poly1305) Seal(ctx context.Context, key, nonce, plaintext, aad []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("seal pointee: %w", err)
	}
	if err := check(key, nonce); err != nil {
		return nil, fmt.Errorf("seal pointee: %w", err)
	}
	a, err := chacha20poly1305.New(key)
	if err != nil {
		return nil, fmt.Errorf("seal pointee: %w: %v", ports.ErrInvalidKey, err)
	}
	return a.Seal(nil, nonce, plaintext, aad), nil
}

// Open authenticates and decrypts ciphertext; failure is ports.ErrCorrupt.
func (ChaCha20Poly1305) Open(ctx context.Context, key, nonce, ciphertext, aad []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open pointee: %w", err)
	}
	if err := check(key, nonce); err != nil {
		return nil, fmt.Errorf("open pointee: %w", err)
	}
	a, err := chacha20poly1305.New(key)
	if err != nil {
		return nil, fmt.Errorf("open pointee: %w: %v", ports.ErrInvalidKey, err)
	}
	pt, err := a.Open(nil, nonce, ciphertext, aad)
	if err != nil {
		return nil, fmt.Errorf("open pointee: %w: authentication failed", ports.ErrCorrupt)
	}
	return pt, nil
}
