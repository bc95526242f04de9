package ratchettree_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/internal/vectors"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

type validationCase struct {
	Suite       uint16        `json:"cipher_suite"`
	Tree        vectors.Hex   `json:"tree"`
	GroupID     vectors.Hex   `json:"group_id"`
	Resolutions [][]uint32    `json:"resolutions"`
	TreeHashes  []vectors.Hex `json:"tree_hashes"`
}

func loadTree(t *testing.T, s *ciphersuite.Suite, b []byte) *ratchettree.Tree {
	t.Helper()
	var rt message.RatchetTree
	if err := codec.Unmarshal(b, &rt); err != nil {
		t.Fatal(err)
	}
	tree, err := ratchettree.Import(s, rt)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// TestTreeValidationVectors runs every case of tree-validation.json
// (§4.1.1, §7.8, §7.9.2, §12.4.3.3): resolutions and tree hashes of every
// node, parent hashes and leaf signatures.
func TestTreeValidationVectors(t *testing.T) {
	var cases []validationCase
	vectors.Load(t, "tree-validation.json", &cases)
	for i, c := range cases {
		t.Run(fmt.Sprintf("tree-validation/%d", i), func(t *testing.T) {
			s, err := ciphersuite.Lookup(ciphersuite.ID(c.Suite))
			if err != nil {
				t.Skipf("suite %d not implemented by regroup: %v", c.Suite, err)
			}
			tree := loadTree(t, s, c.Tree)
			if tree.Width() != len(c.TreeHashes) {
				t.Fatalf("width %d, vector has %d nodes", tree.Width(), len(c.TreeHashes))
			}
			for x := range c.TreeHashes {
				h, err := tree.NodeHash(treemath.NodeIndex(x))
				if err != nil || !bytes.Equal(h, c.TreeHashes[x]) {
					t.Fatalf("tree hash of node %d = %x (%v), want %x", x, h, err, c.TreeHashes[x])
				}
				var got []uint32
				for _, r := range tree.Resolution(treemath.NodeIndex(x)) {
					got = append(got, uint32(r))
				}
				if !slices.Equal(got, c.Resolutions[x]) && !(len(got) == 0 && len(c.Resolutions[x]) == 0) {
					t.Fatalf("resolution of node %d = %v, want %v", x, got, c.Resolutions[x])
				}
				if n := tree.ResolutionSizeExcluding(treemath.NodeIndex(x), nil); n != len(c.Resolutions[x]) {
					t.Fatalf("resolution size of node %d = %d, want %d", x, n, len(c.Resolutions[x]))
				}
			}
			if err := tree.Validate(&ratchettree.ValidateOptions{GroupID: c.GroupID}); err != nil {
				t.Fatalf("validate: %v", err)
			}
			if !bytes.Equal(mustEncode(t, tree.Export()), c.Tree) {
				t.Fatal("export differs from the imported tree")
			}
		})
	}
}

func mustEncode(t *testing.T, m codec.Marshaler) []byte {
	t.Helper()
	b, err := codec.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hostileCases alters a valid tree in ways §7.9.2 and §12.4.3.3 reject.
var hostileCases = []struct {
	name   string
	mutate func(tree *ratchettree.Tree) bool // false when the tree has nothing to alter
}{
	{"parent hash mismatch", func(tree *ratchettree.Tree) bool {
		for x := 1; x < tree.Width(); x += 2 {
			if p := tree.ParentNode(treemath.NodeIndex(x)); p != nil {
				p.EncryptionKey = append([]byte{}, p.EncryptionKey...)
				p.EncryptionKey[0] ^= 1
				return true
			}
		}
		return false
	}},
	{"duplicate signature key", func(tree *ratchettree.Tree) bool {
		m := tree.Members()
		if len(m) < 2 {
			return false
		}
		tree.Leaf(m[1]).SignatureKey = tree.Leaf(m[0]).SignatureKey
		return true
	}},
	{"bad leaf signature", func(tree *ratchettree.Tree) bool {
		l := tree.Leaf(tree.Members()[0])
		l.Signature = append([]byte{}, l.Signature...)
		l.Signature[0] ^= 1
		return true
	}},
	{"unmerged leaf out of range", func(tree *ratchettree.Tree) bool {
		if p := tree.ParentNode(tree.Root()); p != nil {
			p.UnmergedLeaves = append(p.UnmergedLeaves, uint32(tree.LeafCount())+5)
			return true
		}
		return false
	}},
}

// TestHostileTrees (§7.9.2, §12.4.3.3): a parent-hash mismatch, duplicate
// signature keys, a forged leaf signature and an unmerged leaf outside the
// tree are each rejected with ErrInvalid.
func TestHostileTrees(t *testing.T) {
	var cases []validationCase
	vectors.Load(t, "tree-validation.json", &cases)
	for _, h := range hostileCases {
		t.Run(h.name, func(t *testing.T) {
			tried := 0
			for _, c := range cases {
				s, err := ciphersuite.Lookup(ciphersuite.ID(c.Suite))
				if err != nil {
					continue
				}
				tree := loadTree(t, s, c.Tree)
				if !h.mutate(tree) {
					continue
				}
				tried++
				if err := tree.Validate(&ratchettree.ValidateOptions{GroupID: c.GroupID}); !errors.Is(err, ratchettree.ErrInvalid) {
					t.Fatalf("altered tree accepted: %v", err)
				}
			}
			if tried == 0 {
				t.Fatal("no vector tree could be altered")
			}
		})
	}
}
