// Package edkey refuses Ed25519 public keys that prove nothing: encodings
// of a point of small order, for which a signature verifies without any
// private key, and non-canonical encodings, which give one key several
// byte strings. Every place regroup accepts an Ed25519 public key from
// the network (connection authentication, commit-log entry signatures,
// identity updates, key packages) checks it with [Check] (COMP-320).
package edkey

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"

	"github.com/oasisprotocol/curve25519-voi/curve"
)

// ErrWeakKey is wrapped by every error [Check] returns.
var ErrWeakKey = errors.New("unusable Ed25519 public key")

// Check returns nil when pub is a 32-byte canonical encoding of a point
// of the Ed25519 curve outside its small-order subgroup; otherwise an error
// wrapping [ErrWeakKey] that says which of the three it is not.
func Check(pub []byte) error {
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: %d bytes, want %d", ErrWeakKey, len(pub), ed25519.PublicKeySize)
	}
	var c curve.CompressedEdwardsY
	if _, err := c.SetBytes(pub); err != nil {
		return fmt.Errorf("%w: %v", ErrWeakKey, err)
	}
	var p curve.EdwardsPoint
	if _, err := p.SetCompressedY(&c); err != nil {
		return fmt.Errorf("%w: not a curve point", ErrWeakKey)
	}
	var back curve.CompressedEdwardsY
	back.SetEdwardsPoint(&p)
	if !bytes.Equal(back[:], pub) {
		return fmt.Errorf("%w: non-canonical encoding", ErrWeakKey)
	}
	if p.IsSmallOrder() {
		return fmt.Errorf("%w: point of small order", ErrWeakKey)
	}
	return nil
}

// Usable reports whether [Check] accepts pub.
func Usable(pub []byte) bool { return Check(pub) == nil }
