package ratchettree_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// signedTree returns a tree of n key-package leaves, each signed by its
// own fresh key, in suite 3.
func signedTree(t *testing.T, n int) *ratchettree.Tree {
	t.Helper()
	s, err := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	var tree *ratchettree.Tree
	for i := range n {
		priv, pub, _ := s.GenerateSignatureKey()
		leaf := &message.LeafNode{
			EncryptionKey: fmt.Appendf(nil, "enc-%04d-0123456789abcdef012345", i),
			SignatureKey:  pub,
			Credential:    message.Credential{Type: message.CredentialBasic, Identity: fmt.Appendf(nil, "member-%d", i)},
			Capabilities:  message.Capabilities{Credentials: []message.CredentialType{message.CredentialBasic}},
			Source:        message.SourceKeyPackage, Lifetime: message.Lifetime{NotAfter: 1 << 62},
		}
		if err := leaf.Sign(s, priv, nil, 0); err != nil {
			t.Fatal(err)
		}
		if tree == nil {
			tree = ratchettree.New(s, leaf)
		} else if _, err := tree.AddLeaf(leaf); err != nil {
			t.Fatal(err)
		}
	}
	return tree
}

// A tree large enough for its leaf signatures to be verified in batches
// (§12.4.3.3, COMP-097) validates when every signature is good, and a
// single bad signature anywhere is reported for its own leaf, the first
// in index order when several are bad.
func TestValidateLargeTreeNamesTheBadLeaf(t *testing.T) {
	tree := signedTree(t, 600)
	if err := tree.Validate(nil); err != nil {
		t.Fatalf("valid tree of 600 leaves: %v", err)
	}
	for _, bad := range [][]uint32{{417}, {3, 599}, {0}} {
		c := tree.Clone()
		for _, l := range bad {
			leaf := *c.Leaf(treemath.LeafIndex(l))
			leaf.Signature = append([]byte{}, leaf.Signature...)
			leaf.Signature[5] ^= 1
			if err := c.SetLeaf(treemath.LeafIndex(l), &leaf); err != nil {
				t.Fatal(err)
			}
		}
		err := c.Validate(nil)
		if !errors.Is(err, ratchettree.ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprintf("leaf %d: verify leaf node", bad[0])) {
			t.Fatalf("bad signatures at %v: %v", bad, err)
		}
	}
}
