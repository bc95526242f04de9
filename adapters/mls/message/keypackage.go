package message

import (
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
)

// KeyPackage advertises a client's keys for being added to groups (§10).
type KeyPackage struct {
	Version     ProtocolVersion
	CipherSuite ciphersuite.ID
	InitKey     []byte
	LeafNode    LeafNode
	Extensions  Extensions
	Signature   []byte
}

const keyPackageSignLabel = "KeyPackageTBS"

func (k *KeyPackage) marshalContent(w *codec.Writer) {
	w.Uint16(uint16(k.Version))
	w.Uint16(uint16(k.CipherSuite))
	w.Opaque(k.InitKey)
	k.LeafNode.MarshalMLS(w)
	k.Extensions.MarshalMLS(w)
}

// MarshalMLS writes the KeyPackage.
func (k *KeyPackage) MarshalMLS(w *codec.Writer) {
	k.marshalContent(w)
	w.Opaque(k.Signature)
}

// UnmarshalMLS reads a KeyPackage.
func (k *KeyPackage) UnmarshalMLS(r *codec.Reader) {
	k.Version = ProtocolVersion(r.Uint16())
	k.CipherSuite = ciphersuite.ID(r.Uint16())
	k.InitKey = r.Opaque()
	r.Value(&k.LeafNode)
	r.Value(&k.Extensions)
	k.Signature = r.Opaque()
}

// TBS returns the KeyPackageTBS encoding.
func (k *KeyPackage) TBS() ([]byte, error) {
	w := codec.NewWriter(512)
	k.marshalContent(w)
	return w.Bytes()
}

// Sign sets k.Signature to SignWithLabel(priv, "KeyPackageTBS", TBS).
func (k *KeyPackage) Sign(s *ciphersuite.Suite, priv []byte) error {
	tbs, err := k.TBS()
	if err != nil {
		return err
	}
	sig, err := s.SignWithLabel(priv, keyPackageSignLabel, tbs)
	if err != nil {
		return fmt.Errorf("sign key package: %w", err)
	}
	k.Signature = sig
	return nil
}

// Verify checks k.Signature under the leaf node's signature key.
func (k *KeyPackage) Verify(s *ciphersuite.Suite) error {
	tbs, err := k.TBS()
	if err != nil {
		return err
	}
	if err := s.VerifyWithLabel(k.LeafNode.SignatureKey, keyPackageSignLabel, tbs, k.Signature); err != nil {
		return fmt.Errorf("verify key package: %w", err)
	}
	return nil
}

// Ref returns the KeyPackageRef of k (§5.2).
func (k *KeyPackage) Ref(s *ciphersuite.Suite) ([]byte, error) {
	b, err := codec.Marshal(k)
	if err != nil {
		return nil, err
	}
	return s.MakeKeyPackageRef(b)
}
