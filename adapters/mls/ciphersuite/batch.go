package ciphersuite

import (
	"crypto/ed25519"
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/internal/ed25519batch"
)

// SignatureCheck is one [Suite.VerifyWithLabel] call for
// [Suite.VerifyAllWithLabel].
type SignatureCheck struct {
	PublicKey []byte
	Label     string
	Content   []byte
	Signature []byte
	// Signed, when set, is the whole SignContent (see [Labeled]) the
	// signature covers; Label and Content are then not used.
	Signed []byte
	// Write, when set and Signed is not, writes the content instead of
	// Content: [Suite.VerifyAllWithLabel] then encodes each SignContent
	// when it verifies it, into a buffer it reuses, and never holds
	// thousands at once. It may be called more than once, from any
	// goroutine.
	Write func(w *codec.Writer)
}

// signed returns the SignContent c covers.
func (c *SignatureCheck) signed() ([]byte, error) {
	if c.Signed != nil {
		return c.Signed, nil
	}
	if c.Write != nil {
		return c.appendSigned(nil)
	}
	return labeled(c.Label, c.Content)
}

// appendSigned appends the SignContent c.Write gives to dst.
func (c *SignatureCheck) appendSigned(dst []byte) ([]byte, error) {
	w := codec.NewWriterOn(dst)
	w.Opaque([]byte(LabelPrefix + c.Label))
	w.Vector(c.Write)
	return w.Bytes()
}

// VerifyAllWithLabel checks every signature and returns, per check, what
// [Suite.VerifyWithLabel] returns for it: nil, or an error wrapping
// ErrBadSignature or ErrInvalidKey. It accepts exactly what
// VerifyWithLabel accepts. In Ed25519 suites the signatures are verified
// in batches spread over the available cores, with crypto/ed25519's
// verdict for each (see package internal/ed25519batch); a check that
// fails is verified again on its own for its error.
func (s *Suite) VerifyAllWithLabel(checks []SignatureCheck) []error {
	out := make([]error, len(checks))
	if s.r.sig != Ed25519 {
		for i, c := range checks {
			tbs, err := c.signed()
			if err == nil {
				err = s.Verify(c.PublicKey, tbs, c.Signature)
			}
			out[i] = err
		}
		return out
	}
	batch := make([]ed25519batch.Check, len(checks))
	for i, c := range checks {
		batch[i] = ed25519batch.Check{PublicKey: c.PublicKey, Signature: c.Signature}
		if c.Signed == nil && c.Write != nil {
			continue // written when verified
		}
		tbs, err := c.signed()
		if err != nil {
			out[i] = err
			continue
		}
		batch[i].Message = tbs
	}
	// Each check's SignContent is written by one goroutine at a time; an
	// encoding failure is kept as the check's error (distinct elements).
	written := func(i int, dst []byte) []byte {
		if out[i] != nil {
			return append(dst, 0) // no SignContent: the check fails anyway
		}
		b, err := checks[i].appendSigned(dst)
		if err != nil {
			out[i] = err
			return append(dst, 0)
		}
		return b
	}
	for i, ok := range ed25519batch.VerifyAppended(batch, written) {
		switch {
		case out[i] != nil || ok:
		case len(checks[i].PublicKey) != ed25519.PublicKeySize:
			out[i] = fmt.Errorf("%w: Ed25519 public key of %d bytes", ErrInvalidKey, len(checks[i].PublicKey))
		default:
			out[i] = ErrBadSignature
		}
	}
	return out
}
