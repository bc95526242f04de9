// Package treekem implements TreeKEM (RFC 9420 §7.4–7.6): a member's
// private keys for the nodes of the ratchet tree, creating an UpdatePath
// for a commit, merging a received UpdatePath into the tree with parent
// hash verification, decrypting its path secret and deriving the
// commit_secret.
//
// # Key erasure
//
// [PrivateState] forgets the private keys of every node an UpdatePath
// replaces; path and node secrets are dropped as soon as the key pairs are
// derived (§7.5).
//
// # Errors
//
// A path that does not fit the tree is [ErrPathMismatch]; a leaf parent
// hash that does not match is [ErrParentHash]; a path secret that cannot be
// decrypted or derives keys other than the path's is [ErrDecrypt].
package treekem

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// Sentinel errors.
var (
	// ErrPathMismatch means an UpdatePath's length or ciphertext counts do
	// not match the sender's filtered direct path.
	ErrPathMismatch = errors.New("treekem: update path does not fit the tree")
	// ErrParentHash means the committer's leaf carries the wrong parent hash.
	ErrParentHash = errors.New("treekem: parent hash mismatch")
	// ErrDecrypt means no path secret could be decrypted, or the keys it
	// derives differ from the path's public keys.
	ErrDecrypt = errors.New("treekem: cannot decrypt path secret")
	// ErrNoKey means the private state lacks a key the operation needs.
	ErrNoKey = errors.New("treekem: missing private key")
)

// PrivateState holds one member's private keys: its leaf's and those of
// the parent nodes whose path secret it knows.
type PrivateState struct {
	suite *ciphersuite.Suite
	leaf  treemath.LeafIndex
	keys  map[treemath.NodeIndex][]byte
}

// NewPrivateState returns the state of the member at leaf with its leaf's
// HPKE private key.
func NewPrivateState(s *ciphersuite.Suite, leaf treemath.LeafIndex, leafPriv []byte) *PrivateState {
	return &PrivateState{suite: s, leaf: leaf, keys: map[treemath.NodeIndex][]byte{leaf.Node(): append([]byte(nil), leafPriv...)}}
}

// Leaf returns the member's leaf index.
func (p *PrivateState) Leaf() treemath.LeafIndex { return p.leaf }

// Key returns the private key held for node x.
func (p *PrivateState) Key(x treemath.NodeIndex) ([]byte, bool) {
	k, ok := p.keys[x]
	return k, ok
}

// Clone returns an independent copy of the state.
func (p *PrivateState) Clone() *PrivateState {
	c := &PrivateState{suite: p.suite, leaf: p.leaf, keys: make(map[treemath.NodeIndex][]byte, len(p.keys))}
	for x, k := range p.keys {
		c.keys[x] = append([]byte(nil), k...)
	}
	return c
}

// NodeKeyPair derives a node's key pair from its path secret:
// DeriveKeyPair(DeriveSecret(path_secret, "node")) (§7.4).
func NodeKeyPair(s *ciphersuite.Suite, pathSecret []byte) (priv, pub []byte, err error) {
	ns, err := s.DeriveSecret(pathSecret, "node")
	if err != nil {
		return nil, nil, err
	}
	defer clear(ns)
	return s.DeriveHPKEKeyPair(ns)
}

// SetPathSecret stores the private key that pathSecret gives node x.
func (p *PrivateState) SetPathSecret(x treemath.NodeIndex, pathSecret []byte) error {
	priv, _, err := NodeKeyPair(p.suite, pathSecret)
	if err != nil {
		return err
	}
	p.keys[x] = priv
	return nil
}

// Forget erases the key of node x.
func (p *PrivateState) Forget(x treemath.NodeIndex) {
	if k, ok := p.keys[x]; ok {
		clear(k)
		delete(p.keys, x)
	}
}

// Consistent checks that every held key belongs to a non-blank node of tree
// with the matching public key.
func (p *PrivateState) Consistent(tree *ratchettree.Tree) error {
	for x, k := range p.keys {
		pub, err := p.suite.HPKEPublicKey(k)
		if err != nil {
			return err
		}
		if want := tree.EncryptionKey(x); want == nil || !bytes.Equal(pub, want) {
			return fmt.Errorf("%w: key for node %d does not match the tree", ErrNoKey, x)
		}
	}
	return nil
}

// usableKey returns the key for x if it matches the tree's public key.
func (p *PrivateState) usableKey(tree *ratchettree.Tree, x treemath.NodeIndex) ([]byte, bool) {
	k, ok := p.keys[x]
	if !ok {
		return nil, false
	}
	pub, err := p.suite.HPKEPublicKey(k)
	if err != nil || !bytes.Equal(pub, tree.EncryptionKey(x)) {
		return nil, false
	}
	return k, true
}

// SetLeafKey replaces the member's leaf private key, as when an Update
// proposal of its own is committed (§12.1.2).
func (p *PrivateState) SetLeafKey(priv []byte) {
	p.Forget(p.leaf.Node())
	p.keys[p.leaf.Node()] = append([]byte(nil), priv...)
}
