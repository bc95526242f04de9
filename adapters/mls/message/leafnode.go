package message

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
)

// LeafNodeSource says why a leaf node was created (§7.2).
type LeafNodeSource uint8

// Leaf node sources.
const (
	SourceKeyPackage LeafNodeSource = 1
	SourceUpdate     LeafNodeSource = 2
	SourceCommit     LeafNodeSource = 3
)

// LeafNode is a member's leaf in the ratchet tree (§7.2). Lifetime is
// meaningful for SourceKeyPackage and ParentHash for SourceCommit.
type LeafNode struct {
	EncryptionKey []byte
	SignatureKey  []byte
	Credential    Credential
	Capabilities  Capabilities
	Source        LeafNodeSource
	Lifetime      Lifetime
	ParentHash    []byte
	Extensions    Extensions
	Signature     []byte
}

// Equal reports whether n and o hold the same values in every field, and
// so encode the same (nil and empty slices are equal). It compares without
// encoding.
func (n *LeafNode) Equal(o *LeafNode) bool {
	if n == nil || o == nil {
		return n == o
	}
	return bytes.Equal(n.Signature, o.Signature) && // differs first when anything differs
		bytes.Equal(n.EncryptionKey, o.EncryptionKey) && bytes.Equal(n.SignatureKey, o.SignatureKey) &&
		n.Credential.Type == o.Credential.Type && bytes.Equal(n.Credential.Identity, o.Credential.Identity) &&
		slices.EqualFunc(n.Credential.Certificates, o.Credential.Certificates, bytes.Equal) &&
		slices.Equal(n.Capabilities.Versions, o.Capabilities.Versions) &&
		slices.Equal(n.Capabilities.CipherSuites, o.Capabilities.CipherSuites) &&
		slices.Equal(n.Capabilities.Extensions, o.Capabilities.Extensions) &&
		slices.Equal(n.Capabilities.Proposals, o.Capabilities.Proposals) &&
		slices.Equal(n.Capabilities.Credentials, o.Capabilities.Credentials) &&
		n.Source == o.Source && n.Lifetime == o.Lifetime && bytes.Equal(n.ParentHash, o.ParentHash) &&
		slices.EqualFunc(n.Extensions, o.Extensions, func(a, b Extension) bool { return a.Type == b.Type && bytes.Equal(a.Data, b.Data) })
}

// leafNodeSignLabel is the SignWithLabel label of LeafNodeTBS.
const leafNodeSignLabel = "LeafNodeTBS"

func (n *LeafNode) marshalContent(w *codec.Writer) {
	w.Opaque(n.EncryptionKey)
	w.Opaque(n.SignatureKey)
	n.Credential.MarshalMLS(w)
	n.Capabilities.MarshalMLS(w)
	w.Uint8(uint8(n.Source))
	switch n.Source {
	case SourceKeyPackage:
		w.Uint64(n.Lifetime.NotBefore)
		w.Uint64(n.Lifetime.NotAfter)
	case SourceUpdate:
	case SourceCommit:
		w.Opaque(n.ParentHash)
	default:
		w.Fail(fmt.Errorf("%w: leaf node source %d", ErrUnknownType, n.Source))
	}
	n.Extensions.MarshalMLS(w)
}

// MarshalMLS writes the LeafNode.
func (n *LeafNode) MarshalMLS(w *codec.Writer) {
	n.marshalContent(w)
	w.Opaque(n.Signature)
}

// UnmarshalMLS reads a LeafNode.
func (n *LeafNode) UnmarshalMLS(r *codec.Reader) {
	n.EncryptionKey = r.Opaque()
	n.SignatureKey = r.Opaque()
	r.Value(&n.Credential)
	r.Value(&n.Capabilities)
	n.Source = LeafNodeSource(r.Uint8())
	switch n.Source {
	case SourceKeyPackage:
		n.Lifetime.NotBefore = r.Uint64()
		n.Lifetime.NotAfter = r.Uint64()
	case SourceUpdate:
	case SourceCommit:
		n.ParentHash = r.Opaque()
	default:
		r.Fail(fmt.Errorf("%w: leaf node source %d", ErrUnknownType, n.Source))
	}
	r.Value(&n.Extensions)
	n.Signature = r.Opaque()
}

// TBS returns the LeafNodeTBS encoding (§7.2). groupID and leaf are used
// only for the update and commit sources.
func (n *LeafNode) TBS(groupID []byte, leaf uint32) ([]byte, error) {
	w := codec.NewWriter(256)
	n.marshalTBS(w, groupID, leaf)
	return w.Bytes()
}

func (n *LeafNode) marshalTBS(w *codec.Writer, groupID []byte, leaf uint32) {
	n.marshalContent(w)
	if n.Source == SourceUpdate || n.Source == SourceCommit {
		w.Opaque(groupID)
		w.Uint32(leaf)
	}
}

// Sign sets n.Signature to SignWithLabel(priv, "LeafNodeTBS", TBS).
func (n *LeafNode) Sign(s *ciphersuite.Suite, priv, groupID []byte, leaf uint32) error {
	tbs, err := n.TBS(groupID, leaf)
	if err != nil {
		return err
	}
	sig, err := s.SignWithLabel(priv, leafNodeSignLabel, tbs)
	if err != nil {
		return fmt.Errorf("sign leaf node: %w", err)
	}
	n.Signature = sig
	return nil
}

// Verify checks n.Signature under n.SignatureKey; failure wraps
// ciphersuite.ErrBadSignature.
func (n *LeafNode) Verify(s *ciphersuite.Suite, groupID []byte, leaf uint32) error {
	signed, err := ciphersuite.Labeled(leafNodeSignLabel, n.tbsSize(groupID), func(w *codec.Writer) { n.marshalTBS(w, groupID, leaf) })
	if err != nil {
		return err
	}
	if err := s.Verify(n.SignatureKey, signed, n.Signature); err != nil {
		return fmt.Errorf("verify leaf node: %w", err)
	}
	return nil
}

// tbsSize is a hint of the LeafNodeTBS's size.
func (n *LeafNode) tbsSize(groupID []byte) int {
	size := 256 + len(n.Credential.Identity) + len(groupID)
	for _, e := range n.Extensions {
		size += len(e.Data) + 8
	}
	return size
}

// SignatureCheck returns the check [LeafNode.Verify] makes, for
// [ciphersuite.Suite.VerifyAllWithLabel]: n.Signature under
// n.SignatureKey over the LeafNodeTBS of leaf in the group, written when
// verified (a tree's thousands of TBS are never held at once).
func (n *LeafNode) SignatureCheck(groupID []byte, leaf uint32) (ciphersuite.SignatureCheck, error) {
	return ciphersuite.SignatureCheck{PublicKey: n.SignatureKey, Label: leafNodeSignLabel, Signature: n.Signature,
		Write: func(w *codec.Writer) { n.marshalTBS(w, groupID, leaf) }}, nil
}
