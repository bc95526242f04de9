package commitlog

import (
	"crypto/ed25519"

	"github.com/regroup-mls/regroup/internal/edkey"
)

// SignatureCheck is one Ed25519 verification: Ed25519ctx for the publish
// signature, Ed25519ph (Message is then the SHA-512 digest) for the
// author signature.
type SignatureCheck struct {
	PublicKey []byte
	Message   []byte
	Signature []byte
	Options   *ed25519.Options
}

// Verifier checks signatures. VerifyAll returns, for each check, exactly
// what crypto/ed25519.VerifyWithOptions accepts under a key
// internal/edkey accepts (never under a small-order or non-canonical key,
// COMP-320); an implementation may check many at once but must never
// accept a signature that rule rejects, nor reject one it accepts.
type Verifier interface {
	VerifyAll(checks []SignatureCheck) []bool
}

// SingleVerifier verifies each signature with crypto/ed25519.
type SingleVerifier struct{}

// VerifyAll verifies each check on its own.
func (SingleVerifier) VerifyAll(checks []SignatureCheck) []bool {
	out := make([]bool, len(checks))
	for i, c := range checks {
		out[i] = verifyOne(c)
	}
	return out
}

func verifyOne(c SignatureCheck) bool {
	if !edkey.Usable(c.PublicKey) { // COMP-320: small-order and non-canonical keys prove nothing
		return false
	}
	return ed25519.VerifyWithOptions(ed25519.PublicKey(c.PublicKey), c.Message, c.Signature, c.Options) == nil
}
