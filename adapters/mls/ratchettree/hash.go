package ratchettree

import (
	"slices"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// TreeHash returns the tree hash of the root (§7.8).
func (t *Tree) TreeHash() ([]byte, error) { return t.NodeHash(t.Root()) }

// NodeHash returns the tree hash of the subtree rooted at x (§7.8), a
// copy the caller may keep or modify.
func (t *Tree) NodeHash(x treemath.NodeIndex) ([]byte, error) {
	if uint64(x) >= uint64(len(t.nodes)) {
		return nil, ErrOutOfRange
	}
	h, err := t.hash(x, nil, codec.NewWriter(hashScratch))
	return slices.Clone(h), err
}

// hash computes the tree hash of x as if the leaves in exclude were blank
// and absent from every unmerged_leaves list (§7.9 original sibling hash).
// A subtree that holds none of the excluded leaves hashes as it is, so its
// hash comes from, and goes to, the cache.
// w is scratch space for the encodings hashed, shared by the whole walk.
func (t *Tree) hash(x treemath.NodeIndex, exclude []uint32, w *codec.Writer) ([]byte, error) {
	if !slices.ContainsFunc(exclude, func(u uint32) bool { return subtreeHas(x, treemath.LeafIndex(u)) }) {
		exclude = nil
	}
	if exclude == nil && t.hashes != nil && t.hashes[x] != nil {
		return t.hashes[x], nil
	}
	h, err := t.computeHash(x, exclude, w)
	if err != nil || exclude != nil {
		return h, err
	}
	if t.hashes == nil {
		t.hashes = make([][]byte, len(t.nodes))
	}
	t.hashes[x] = h
	return h, nil
}

// hashScratch is the starting size of the scratch buffer of a tree-hash
// walk: enough for a leaf with a few extensions.
const hashScratch = 512

// computeHash hashes the TreeHashInput of x, encoded in w once its
// children's hashes are known.
func (t *Tree) computeHash(x treemath.NodeIndex, exclude []uint32, w *codec.Writer) ([]byte, error) {
	n := t.nodes[x]
	if x.IsLeaf() {
		l, _ := x.Leaf()
		w.Reset()
		w.Uint8(uint8(message.NodeLeaf))
		w.Uint32(uint32(l))
		present := n != nil && !slices.Contains(exclude, uint32(l))
		w.Bool(present)
		if present {
			n.Leaf.MarshalMLS(w)
		}
	} else {
		left, _ := treemath.Left(x)
		right, _ := treemath.Right(x, t.LeafCount())
		lh, err := t.hash(left, exclude, w)
		if err != nil {
			return nil, err
		}
		rh, err := t.hash(right, exclude, w)
		if err != nil {
			return nil, err
		}
		w.Reset()
		w.Uint8(uint8(message.NodeParent))
		w.Bool(n != nil)
		if n != nil {
			p := *n.Parent
			if len(exclude) > 0 {
				p.UnmergedLeaves = slices.DeleteFunc(slices.Clone(p.UnmergedLeaves), func(u uint32) bool {
					return slices.Contains(exclude, u)
				})
			}
			p.MarshalMLS(w)
		}
		w.Opaque(lh)
		w.Opaque(rh)
	}
	b, err := w.Bytes()
	if err != nil {
		return nil, err
	}
	return t.suite.Hash(b), nil
}

// ParentHash returns the parent hash of parent node p with copath child s
// (§7.9): Hash(ParentHashInput{p.encryption_key, p.parent_hash, tree hash of
// s with p's unmerged leaves removed}).
func (t *Tree) ParentHash(p, s treemath.NodeIndex) ([]byte, error) {
	pn := t.ParentNode(p)
	if pn == nil || uint64(s) >= uint64(len(t.nodes)) {
		return nil, ErrOutOfRange
	}
	sh, err := t.hash(s, pn.UnmergedLeaves, codec.NewWriter(hashScratch))
	if err != nil {
		return nil, err
	}
	return parentHashOf(t, pn.EncryptionKey, pn.ParentHash, sh)
}

func parentHashOf(t *Tree, key, parentHash, siblingHash []byte) ([]byte, error) {
	w := codec.NewWriter(len(key) + len(parentHash) + len(siblingHash) + 8)
	w.Opaque(key)
	w.Opaque(parentHash)
	w.Opaque(siblingHash)
	b, err := w.Bytes()
	if err != nil {
		return nil, err
	}
	return t.suite.Hash(b), nil
}
