package ratchettree_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// TestHashCacheMatchesFreshHash (§7.8, §7.9): after every change a tree
// can undergo, the cached tree hash of every node and every parent hash
// equal those of a fresh copy of the same tree that has never hashed
// anything, and a clone's changes leave the original's hashes alone.
func TestHashCacheMatchesFreshHash(t *testing.T) {
	s, err := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 9))
	next := 0
	leaf := func() *message.LeafNode {
		next++
		return &message.LeafNode{
			EncryptionKey: fmt.Appendf(nil, "enc-%d", next),
			SignatureKey:  fmt.Appendf(nil, "sig-%d", next),
			Credential:    message.Credential{Type: message.CredentialBasic, Identity: fmt.Appendf(nil, "id-%d", next)},
			Source:        message.SourceKeyPackage,
			Signature:     []byte("s"),
		}
	}
	tree := ratchettree.New(s, leaf())
	var saved *ratchettree.Tree
	var savedHashes [][]byte
	for step := range 400 {
		members := tree.Members()
		some := members[rng.IntN(len(members))]
		var op string
		switch k := rng.IntN(10); {
		case k < 3 || len(members) < 3:
			op = "add"
			_, err = tree.AddLeaf(leaf())
		case k == 3:
			op = "update"
			err = tree.UpdateLeaf(some, leaf())
		case k == 4:
			op = "remove"
			err = tree.RemoveLeaf(some)
		case k == 5:
			op = "set parent"
			path := treemath.DirectPath(some.Node(), tree.LeafCount())
			x := path[rng.IntN(len(path))]
			err = tree.SetParent(x, &message.ParentNode{EncryptionKey: fmt.Appendf(nil, "p-%d", step), UnmergedLeaves: unmergedBelow(tree, x, rng)})
		case k == 6:
			op = "set parent hash"
			for _, x := range treemath.DirectPath(some.Node(), tree.LeafCount()) {
				if tree.ParentNode(x) != nil {
					err = tree.SetParentHash(x, fmt.Appendf(nil, "ph-%d", step))
					break
				}
			}
		case k == 8:
			op = "set leaf"
			err = tree.SetLeaf(some, leaf())
		case k == 7:
			op = "blank path"
			err = tree.BlankPath(some)
		default:
			op = "clone"
			if saved != nil && !sameHashes(t, saved, savedHashes) {
				t.Fatalf("step %d: changes to a clone changed the original's hashes", step)
			}
			saved, savedHashes = tree, allHashes(t, tree)
			tree = tree.Clone()
		}
		if err != nil {
			t.Fatalf("step %d (%s): %v", step, op, err)
		}
		fresh, err := ratchettree.Import(s, tree.Export())
		if err != nil {
			t.Fatalf("step %d (%s): re-import: %v", step, op, err)
		}
		if !sameHashes(t, tree, allHashes(t, fresh)) {
			t.Fatalf("step %d (%s): cached hashes differ from a fresh tree's", step, op)
		}
		for x := 1; x < tree.Width(); x += 2 {
			p := treemath.NodeIndex(x)
			if tree.ParentNode(p) == nil {
				continue
			}
			l, _ := treemath.Left(p)
			r, _ := treemath.Right(p, tree.LeafCount())
			for _, c := range []treemath.NodeIndex{l, r} {
				got, err1 := tree.ParentHash(p, c)
				want, err2 := fresh.ParentHash(p, c)
				if err1 != nil || err2 != nil || !bytes.Equal(got, want) {
					t.Fatalf("step %d (%s): parent hash of %d over %d = %x (%v), fresh %x (%v)", step, op, p, c, got, err1, want, err2)
				}
			}
		}
	}
}

// unmergedBelow returns some of the non-blank leaves under x, ascending.
func unmergedBelow(tree *ratchettree.Tree, x treemath.NodeIndex, rng *rand.Rand) []uint32 {
	out := []uint32{}
	for _, l := range tree.Members() {
		if treemath.IsAncestor(x, l.Node(), tree.LeafCount()) && rng.IntN(3) == 0 {
			out = append(out, uint32(l))
		}
	}
	return out
}

// allHashes returns the tree hash of every node of tree, in node order.
func allHashes(t *testing.T, tree *ratchettree.Tree) [][]byte {
	t.Helper()
	out := make([][]byte, tree.Width())
	for x := range out {
		h, err := tree.NodeHash(treemath.NodeIndex(x))
		if err != nil {
			t.Fatal(err)
		}
		out[x] = h
	}
	return out
}

// sameHashes reports whether tree's node hashes are want.
func sameHashes(t *testing.T, tree *ratchettree.Tree, want [][]byte) bool {
	t.Helper()
	got := allHashes(t, tree)
	if len(got) != len(want) {
		return false
	}
	for x := range got {
		if !bytes.Equal(got[x], want[x]) {
			return false
		}
	}
	return true
}
