package commitlog

import (
	"crypto/ed25519"
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
// what crypto/ed25519.VerifyWithOptions accepts; an implementation may
// check many at once but must never accept a signature crypto/ed25519
// rejects, nor reject one it accepts.
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
	if len(c.PublicKey) != ed25519.PublicKeySize {
		return false
	}
	return ed25519.VerifyWithOptions(ed25519.PublicKey(c.PublicKey), c.Message, c.Signature, c.Options) == nil
}
