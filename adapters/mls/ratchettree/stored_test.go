package ratchettree_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// nodeBytes encodes the node at x, nil when blank or beyond the tree.
func nodeBytes(t *testing.T, tree *ratchettree.Tree, x treemath.NodeIndex) []byte {
	n := tree.Node(x)
	if n == nil {
		return nil
	}
	b, err := codec.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Changes names every node whose content differs from the tree as it was
// at MarkStored, through every change a tree can undergo and across
// clones; a tree never marked stored reports everything; a clone made
// before a change does not see it.
func TestChangesNameEveryChangedNode(t *testing.T) {
	s, err := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, 13))
	next := 0
	leaf := func() *message.LeafNode {
		next++
		return &message.LeafNode{EncryptionKey: fmt.Appendf(nil, "enc-%d", next), SignatureKey: fmt.Appendf(nil, "sig-%d", next),
			Credential: message.Credential{Type: message.CredentialBasic}, Source: message.SourceKeyPackage, Signature: []byte("s")}
	}
	tree := ratchettree.New(s, leaf())
	if _, all := tree.Changes(); !all {
		t.Fatal("a tree never stored reports partial changes")
	}
	var base *ratchettree.Tree // the tree as last stored
	for round := range 60 {
		if round%5 == 0 {
			tree.MarkStored(fmt.Appendf(nil, "stamp-%d", round))
			base = tree.Clone()
			if ch, all := tree.Changes(); all || len(ch) != 0 {
				t.Fatalf("round %d: changes right after MarkStored: %v %v", round, ch, all)
			}
		}
		before := tree.Clone()
		atClone, _ := tree.Changes()
		for range 1 + rng.IntN(6) {
			members := tree.Members()
			some := members[rng.IntN(len(members))]
			switch k := rng.IntN(7); {
			case k < 2 || len(members) < 3:
				_, err = tree.AddLeaf(leaf())
			case k == 2:
				err = tree.UpdateLeaf(some, leaf())
			case k == 3:
				err = tree.RemoveLeaf(some)
			case k == 4:
				path := treemath.DirectPath(some.Node(), tree.LeafCount())
				err = tree.SetParent(path[rng.IntN(len(path))], &message.ParentNode{EncryptionKey: fmt.Appendf(nil, "p-%d", next)})
			case k == 5:
				for _, x := range treemath.DirectPath(some.Node(), tree.LeafCount()) {
					if tree.ParentNode(x) != nil {
						err = tree.SetParentHash(x, fmt.Appendf(nil, "ph-%d", next))
						break
					}
				}
			default:
				err = tree.BlankPath(some)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(tree.Stamp(), base.Stamp()) {
			t.Fatalf("round %d: stamp changed without MarkStored", round)
		}
		ch, all := tree.Changes()
		if all {
			t.Fatalf("round %d: a stored tree reports every node", round)
		}
		width := max(tree.Width(), base.Width())
		for x := range width {
			nx := treemath.NodeIndex(x)
			if !bytes.Equal(nodeBytes(t, tree, nx), nodeBytes(t, base, nx)) && !slices.Contains(ch, nx) {
				t.Fatalf("round %d: node %d changed since MarkStored but is not in Changes %v", round, x, ch)
			}
		}
		// The clone taken before this round's changes does not see them.
		if bch, _ := before.Changes(); !slices.Equal(bch, atClone) {
			t.Fatalf("round %d: a clone's changes moved with the original's: %v, was %v", round, bch, atClone)
		}
	}
}
