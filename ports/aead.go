package ports

import (
	"context"
	"fmt"
)

// PointeeAEADID identifies a pointee AEAD: the
// WelcomePointeeEncryptionAeadType value carried in a WelcomeV1Pointer and
// in the 0xff04 key-package extension.
type PointeeAEADID int32

// Wire values of WelcomePointeeEncryptionAeadType (joining-groups section 5).
const (
	// PointeeAEADUnspecified is WELCOME_POINTEE_ENCRYPTION_AEAD_TYPE_UNSPECIFIED;
	// no AEAD is ever registered under it.
	PointeeAEADUnspecified PointeeAEADID = 0
	// PointeeAEADChaCha20Poly1305 is
	// WELCOME_POINTEE_ENCRYPTION_AEAD_TYPE_CHACHA20_POLY1305 (JOIN-078):
	// 32-byte key, 12-byte nonce, 16-byte tag.
	PointeeAEADChaCha20Poly1305 PointeeAEADID = 3
)

// String returns the enum name for known values.
func (id PointeeAEADID) String() string {
	switch id {
	case PointeeAEADUnspecified:
		return "WELCOME_POINTEE_ENCRYPTION_AEAD_TYPE_UNSPECIFIED"
	case PointeeAEADChaCha20Poly1305:
		return "WELCOME_POINTEE_ENCRYPTION_AEAD_TYPE_CHACHA20_POLY1305"
	}
	return fmt.Sprintf("WelcomePointeeEncryptionAeadType(%d)", int32(id))
}

// PointeeAEAD encrypts and authenticates a welcome pointee's data and
// welcome_metadata under the key and nonces a WelcomeV1Pointer carries.
// Implementations are safe for concurrent use; every method that may do I/O
// honours ctx.
type PointeeAEAD interface {
	// ID returns the WelcomePointeeEncryptionAeadType value.
	ID() PointeeAEADID
	// KeySize returns the key size in bytes the pointer's encryption_key
	// must have.
	KeySize() int
	// NonceSize returns the nonce size in bytes data_nonce and
	// welcome_metadata_nonce must have.
	NonceSize() int
	// Seal encrypts and authenticates plaintext with aad (empty for
	// pointees); every byte of aad is authenticated. A key or nonce of the
	// wrong size yields ErrInvalidKey or ErrInvalidInput. Seal modifies
	// none of its arguments and returns a fresh slice.
	Seal(ctx context.Context, key, nonce, plaintext, aad []byte) ([]byte, error)
	// Open authenticates and decrypts ciphertext. A ciphertext that fails
	// authentication under key, nonce and aad (bytes appended included)
	// yields an error wrapping ErrCorrupt (JOIN-064). Open modifies none of
	// its arguments and returns a fresh slice. No error of either method
	// contains plaintext or key material.
	Open(ctx context.Context, key, nonce, ciphertext, aad []byte) ([]byte, error)
}
