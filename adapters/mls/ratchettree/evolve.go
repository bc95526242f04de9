package ratchettree

import (
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// BlankPath blanks every parent node on the direct path of leaf l.
func (t *Tree) BlankPath(l treemath.LeafIndex) error {
	x := l.Node()
	if uint64(x) >= uint64(len(t.nodes)) {
		return fmt.Errorf("%w: leaf %d", ErrOutOfRange, l)
	}
	t.changed(x)
	for _, p := range treemath.DirectPath(x, t.LeafCount()) {
		if t.nodes[p] != nil {
			t.touch(p)
		}
		t.nodes[p] = nil
	}
	return nil
}

// AddLeaf places leaf in the leftmost blank leaf, extending the tree when
// it is full, and lists it as unmerged at every non-blank parent on its
// direct path (§12.1.1). It returns the new leaf's index.
func (t *Tree) AddLeaf(leaf *message.LeafNode) (treemath.LeafIndex, error) {
	idx := -1
	for i := 0; i < len(t.nodes); i += 2 {
		if t.nodes[i] == nil {
			idx = i
			break
		}
	}
	if idx < 0 {
		if len(t.nodes) > maxNodes/2 {
			return 0, fmt.Errorf("%w: tree cannot grow beyond %d nodes", ErrOutOfRange, len(t.nodes))
		}
		idx = len(t.nodes) + 1
		t.nodes = append(t.nodes, make([]*message.Node, len(t.nodes)+1)...)
		if t.hashes != nil {
			// The old tree is the new left subtree, with the same indices
			// and hashes.
			t.hashes = append(t.hashes, make([][]byte, len(t.hashes)+1)...)
		}
	}
	l := treemath.LeafIndex(idx / 2)
	t.changed(l.Node()) // the leaf and the unmerged_leaves above it
	t.touch(l.Node())
	t.nodes[idx] = &message.Node{Type: message.NodeLeaf, Leaf: leaf}
	for _, p := range treemath.DirectPath(l.Node(), t.LeafCount()) {
		if pn := t.ParentNode(p); pn != nil {
			i, found := slices.BinarySearch(pn.UnmergedLeaves, uint32(l))
			if !found {
				pn.UnmergedLeaves = slices.Insert(pn.UnmergedLeaves, i, uint32(l))
				t.touch(p)
			}
		}
	}
	return l, nil
}

// UpdateLeaf replaces the leaf at l and blanks its direct path (§12.1.2).
func (t *Tree) UpdateLeaf(l treemath.LeafIndex, leaf *message.LeafNode) error {
	if t.Leaf(l) == nil {
		return fmt.Errorf("%w: leaf %d is blank or outside the tree", ErrOutOfRange, l)
	}
	if err := t.BlankPath(l); err != nil {
		return err
	}
	return t.SetLeaf(l, leaf)
}

// RemoveLeaf blanks the leaf at l and its direct path, then truncates the
// tree (§12.1.3).
func (t *Tree) RemoveLeaf(l treemath.LeafIndex) error {
	if t.Leaf(l) == nil {
		return fmt.Errorf("%w: leaf %d is blank or outside the tree", ErrOutOfRange, l)
	}
	if err := t.BlankPath(l); err != nil {
		return err
	}
	t.nodes[l.Node()] = nil // BlankPath dropped the leaf's cached hashes
	t.touch(l.Node())
	t.Truncate()
	return nil
}

// Truncate halves the tree while its right subtree is entirely blank,
// discarding the root with it (§7.7).
func (t *Tree) Truncate() {
	for len(t.nodes) > 1 {
		half := (len(t.nodes) - 1) / 2
		for _, n := range t.nodes[half+1:] {
			if n != nil {
				return
			}
		}
		t.nodes = t.nodes[:half]
		if t.hashes != nil {
			t.hashes = t.hashes[:half] // the left subtree keeps its hashes
		}
	}
}
