package ports

import (
	"context"
	"fmt"
)

// WrapperAlgorithmID identifies a Welcome wrapper algorithm. Values 0 to 3 are
// the WelcomeWrapperAlgorithm enum carried in WelcomeMessage.V1 and in the
// 0xff03 key-package extension; values at or above [LocalWrapperIDBase] are
// local to one process and never sent on the wire.
type WrapperAlgorithmID int32

// Wire values of WelcomeWrapperAlgorithm (joining-groups section 4).
const (
	// WrapperUnspecified is WELCOME_WRAPPER_ALGORITHM_UNSPECIFIED; no
	// algorithm is ever registered under it.
	WrapperUnspecified WrapperAlgorithmID = 0
	// WrapperCurve25519 is WELCOME_WRAPPER_ALGORITHM_CURVE25519: HPKE base
	// mode with DHKEM(X25519) 0x0020, HKDF-SHA256, ChaCha20-Poly1305.
	WrapperCurve25519 WrapperAlgorithmID = 1
	// WrapperXWingMLKEM768Draft6 is
	// WELCOME_WRAPPER_ALGORITHM_XWING_MLKEM_768_DRAFT_6: HPKE base mode with
	// the X-Wing KEM under KEM id 0x004D, HKDF-SHA256, ChaCha20-Poly1305.
	WrapperXWingMLKEM768Draft6 WrapperAlgorithmID = 2
	// WrapperSymmetricKey is WELCOME_WRAPPER_ALGORITHM_SYMMETRIC_KEY, which
	// marks a welcome pointee; a pointee is opened with a [PointeeAEAD], so
	// no wrapper algorithm is registered under it.
	WrapperSymmetricKey WrapperAlgorithmID = 3
)

// LocalWrapperIDBase is the first identifier of the local range. A local
// identifier is LocalWrapperIDBase plus the algorithm's HPKE KEM id; it
// names an algorithm inside one deployment (tests, interoperability checks,
// a future wire value not assigned yet) and is never put on the wire.
const LocalWrapperIDBase WrapperAlgorithmID = 0x10000

// WrapperXWingCanonical is the X-Wing wrapper under the canonical HPKE KEM id
// 0x647A (MLKEM768-X25519 of draft-ietf-hpke-pq), otherwise identical to
// [WrapperXWingMLKEM768Draft6]. Deployed clients do not send it; it is
// local (0x1647A) and exists so that the X-Wing key schedule is checked
// against independent implementations.
const WrapperXWingCanonical = LocalWrapperIDBase + 0x647A

// String returns the enum name for wire values and "LOCAL(0x....)" for the
// local range.
func (id WrapperAlgorithmID) String() string {
	switch id {
	case WrapperUnspecified:
		return "WELCOME_WRAPPER_ALGORITHM_UNSPECIFIED"
	case WrapperCurve25519:
		return "WELCOME_WRAPPER_ALGORITHM_CURVE25519"
	case WrapperXWingMLKEM768Draft6:
		return "WELCOME_WRAPPER_ALGORITHM_XWING_MLKEM_768_DRAFT_6"
	case WrapperSymmetricKey:
		return "WELCOME_WRAPPER_ALGORITHM_SYMMETRIC_KEY"
	}
	if id >= LocalWrapperIDBase {
		return fmt.Sprintf("LOCAL(0x%04x)", int32(id-LocalWrapperIDBase))
	}
	return fmt.Sprintf("WelcomeWrapperAlgorithm(%d)", int32(id))
}

// welcomeWrapperInfo is the TLS encoding of EncryptContext{label = "MLS 1.0
// MLS_WELCOME", context = ""} (RFC 9420 section 5.1.3): each field an
// opaque<V> with a one-byte variable-length prefix.
const welcomeWrapperInfo = "\x13MLS 1.0 MLS_WELCOME\x00"

// WelcomeWrapperInfo returns a fresh copy of the HPKE info string every
// Welcome wrapper is sealed and opened under.
func WelcomeWrapperInfo() []byte { return []byte(welcomeWrapperInfo) }

// WrapperAlgorithm seals a Welcome and its WelcomeMetadata to one recipient's
// public key, and opens them with the matching private key.
//
// # Sealed layout
//
// Seal takes one or more plaintexts and seals them in order under one HPKE
// context. sealed[0] is the TLS encoding of HpkeCiphertext{opaque
// kem_output<V>; opaque ciphertext<V>} holding the encapsulated key and the
// first ciphertext (WelcomeMessage.V1.data); sealed[i] for i > 0 is the bare
// ciphertext of plaintext i from the same context (sealed[1] is
// WelcomeMessage.V1.welcome_metadata). Open takes the same slices in the same
// order; it may be given a prefix of them.
//
// Implementations are safe for concurrent use. Every method may do I/O (a
// plugin-hosted algorithm calls another process) and honours ctx.
type WrapperAlgorithm interface {
	// ID returns the identifier the algorithm is registered under; for wire
	// algorithms it is the WelcomeWrapperAlgorithm value.
	ID() WrapperAlgorithmID
	// PublicKeySize returns the size of a public key in bytes (32 for
	// CURVE25519, 1,216 for X-Wing; JOIN-090).
	PublicKeySize() int
	// GenerateKey returns a fresh key pair: pub is PublicKeySize bytes, priv
	// is the form the installation stores (a 32-byte seed for X-Wing).
	GenerateKey(ctx context.Context) (pub, priv []byte, err error)
	// CheckPublicKey reports whether HPKE sender setup succeeds for pub. It
	// returns an error wrapping ErrInvalidKey when it does not (JOIN-090).
	CheckPublicKey(ctx context.Context, pub []byte) error
	// Seal encrypts plaintexts in order under one HPKE context to pub with
	// the given info and empty aad, returning one sealed slice per plaintext
	// as the package documentation lays out. A pub that is not usable
	// yields ErrInvalidKey; no plaintext yields ErrInvalidInput.
	Seal(ctx context.Context, pub, info []byte, plaintexts ...[]byte) ([][]byte, error)
	// Open decrypts sealed payloads addressed to priv. It must return an
	// error wrapping ErrNotRecipient when the ciphertext was not sealed to
	// priv's public key (or under another info); any other error is
	// treated as a corrupt Welcome and wraps ErrCorrupt, or ErrInvalidKey
	// when priv itself is unusable. A sealed[0] that is not exactly one
	// HpkeCiphertext with minimal length prefixes (RFC 9420 section 2.1.2)
	// wraps ErrCorrupt. Neither Seal nor Open modifies its arguments, their
	// results are fresh slices, and no error contains plaintext or key
	// material.
	Open(ctx context.Context, priv, info []byte, sealed ...[]byte) ([][]byte, error)
}
