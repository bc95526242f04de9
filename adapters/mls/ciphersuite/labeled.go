package ciphersuite

import (
	"encoding/binary"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
)

// LabelPrefix is prepended to every label of the labeled functions (§5.1).
const LabelPrefix = "MLS 1.0 "

// Labels of the reference hashes (§5.2).
const (
	KeyPackageRefLabel = "MLS 1.0 KeyPackage Reference"
	ProposalRefLabel   = "MLS 1.0 Proposal Reference"
)

// labeled encodes struct { opaque label<V> = "MLS 1.0 "+label; opaque
// content<V>; }, the shape of SignContent and EncryptContext.
func labeled(label string, content []byte) ([]byte, error) {
	w := codec.NewWriter(len(LabelPrefix) + len(label) + len(content) + 8)
	w.Opaque([]byte(LabelPrefix + label))
	w.Opaque(content)
	return w.Bytes()
}

// Labeled encodes the same struct as the labeled functions, with the
// content written by fn straight into the result instead of encoded
// first and copied; size is a hint of the content's size. Together with
// [Suite.Verify] it is VerifyWithLabel for a large content.
func Labeled(label string, size int, fn func(w *codec.Writer)) ([]byte, error) {
	w := codec.NewWriter(len(LabelPrefix) + len(label) + size + 16)
	w.Opaque([]byte(LabelPrefix + label))
	w.Vector(fn)
	return w.Bytes()
}

// ExpandWithLabel is KDF.Expand(secret, KDFLabel{length, "MLS 1.0 "+label,
// context}, length) (§8).
func (s *Suite) ExpandWithLabel(secret []byte, label string, context []byte, length int) ([]byte, error) {
	if length < 0 || length > 0xffff {
		return nil, ErrInvalidLength
	}
	w := codec.NewWriter(len(LabelPrefix) + len(label) + len(context) + 12)
	w.Uint16(uint16(length))
	w.Opaque([]byte(LabelPrefix + label))
	w.Opaque(context)
	info, err := w.Bytes()
	if err != nil {
		return nil, err
	}
	return s.Expand(secret, info, length)
}

// DeriveSecret is ExpandWithLabel(secret, label, "", Nh) (§8).
func (s *Suite) DeriveSecret(secret []byte, label string) ([]byte, error) {
	return s.ExpandWithLabel(secret, label, nil, s.r.hashSize)
}

// DeriveTreeSecret is ExpandWithLabel(secret, label, uint32 generation,
// length) (§9).
func (s *Suite) DeriveTreeSecret(secret []byte, label string, generation uint32, length int) ([]byte, error) {
	return s.ExpandWithLabel(secret, label, binary.BigEndian.AppendUint32(nil, generation), length)
}

// SignWithLabel signs SignContent{"MLS 1.0 "+label, content} (§5.1.2).
func (s *Suite) SignWithLabel(priv []byte, label string, content []byte) ([]byte, error) {
	tbs, err := labeled(label, content)
	if err != nil {
		return nil, err
	}
	return s.Sign(priv, tbs)
}

// VerifyWithLabel checks a SignWithLabel signature; a mismatch wraps
// ErrBadSignature.
func (s *Suite) VerifyWithLabel(pub []byte, label string, content, sig []byte) error {
	tbs, err := labeled(label, content)
	if err != nil {
		return err
	}
	return s.Verify(pub, tbs, sig)
}

// EncryptWithLabel is SealBase(pub, EncryptContext{"MLS 1.0 "+label,
// context}, "", plaintext) (§5.1.3).
func (s *Suite) EncryptWithLabel(pub []byte, label string, context, plaintext []byte) (kemOutput, ciphertext []byte, err error) {
	info, err := labeled(label, context)
	if err != nil {
		return nil, nil, err
	}
	return s.HPKESeal(pub, info, nil, plaintext)
}

// DecryptWithLabel opens an EncryptWithLabel ciphertext; failures wrap
// ErrDecrypt or ErrInvalidKey.
func (s *Suite) DecryptWithLabel(priv []byte, label string, context, kemOutput, ciphertext []byte) ([]byte, error) {
	if pt, ok, err := s.openLabeled(priv, label, context, kemOutput, ciphertext); ok {
		return pt, err
	}
	info, err := labeled(label, context)
	if err != nil {
		return nil, err
	}
	return s.HPKEOpen(priv, info, nil, kemOutput, ciphertext)
}

// RefHash is Hash(RefHashInput{label, value}) with label used as given
// (§5.2).
func (s *Suite) RefHash(label string, value []byte) ([]byte, error) {
	w := codec.NewWriter(len(label) + len(value) + 8)
	w.Opaque([]byte(label))
	w.Opaque(value)
	in, err := w.Bytes()
	if err != nil {
		return nil, err
	}
	return s.Hash(in), nil
}

// MakeKeyPackageRef returns the KeyPackageRef of an encoded KeyPackage
// (the MLSMessage-free KeyPackage structure).
func (s *Suite) MakeKeyPackageRef(keyPackage []byte) ([]byte, error) {
	return s.RefHash(KeyPackageRefLabel, keyPackage)
}

// MakeProposalRef returns the ProposalRef of an encoded AuthenticatedContent
// carrying a proposal.
func (s *Suite) MakeProposalRef(authenticatedContent []byte) ([]byte, error) {
	return s.RefHash(ProposalRefLabel, authenticatedContent)
}
