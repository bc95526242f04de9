package ratchettree

import (
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// stored is what a tree knows of its last stored form: the caller's
// stamp for it, and the nodes changed since.
type stored struct {
	stamp   []byte
	changed map[treemath.NodeIndex]struct{}
}

// Changes returns the nodes set, blanked or edited (their unmerged leaves
// or parent hash) since [Tree.MarkStored], ascending; all is true instead
// when the tree was never marked stored. A returned index may lie beyond
// the tree's width when the tree shrank since.
func (t *Tree) Changes() (nodes []treemath.NodeIndex, all bool) {
	if t.store == nil {
		return nil, true
	}
	for x := range t.store.changed {
		nodes = append(nodes, x)
	}
	slices.Sort(nodes)
	return nodes, false
}

// MarkStored records that the tree as it is now has been stored in the
// form stamp names: [Tree.Changes] counts from here, and [Tree.Stamp]
// returns stamp. Clones carry both along.
func (t *Tree) MarkStored(stamp []byte) {
	t.store = &stored{stamp: slices.Clone(stamp), changed: map[treemath.NodeIndex]struct{}{}}
}

// Stamp returns the stamp of the last [Tree.MarkStored], nil when the tree
// was never marked stored.
func (t *Tree) Stamp() []byte {
	if t.store == nil {
		return nil
	}
	return t.store.stamp
}

// touch records a change to the content of node x.
func (t *Tree) touch(x treemath.NodeIndex) {
	if t.store != nil {
		t.store.changed[x] = struct{}{}
	}
}

// cloneStore copies the stored state for a clone.
func (s *stored) clone() *stored {
	if s == nil {
		return nil
	}
	c := &stored{stamp: s.stamp, changed: make(map[treemath.NodeIndex]struct{}, len(s.changed))}
	for x := range s.changed {
		c.changed[x] = struct{}{}
	}
	return c
}

// NodeChange is the content of one node after a change; a nil Node blanks
// it.
type NodeChange struct {
	Index treemath.NodeIndex
	Node  *message.Node
}

// Patch resizes the tree to width nodes, a full tree's width, and sets
// the nodes of changes, recording each as changed: applied to the tree a
// set of changes was read from (see [Tree.Changes]), it rebuilds the tree
// they were read on. A node must have the type of its position (leaves at
// even indices), and the nodes a shrinking tree drops must be blank once
// the changes are applied.
func (t *Tree) Patch(width int, changes []NodeChange) error {
	if width < 1 || width > maxNodes || (width+1)&width != 0 {
		return fmt.Errorf("%w: width %d", ErrMalformed, width)
	}
	// A tree grows only to hold the nodes set: no larger than the full
	// width that covers them and the tree as it is.
	need := len(t.nodes)
	for _, c := range changes {
		need = max(need, int(min(uint64(c.Index), maxNodes))+1)
	}
	if cover := fullWidth(need); width > cover {
		return fmt.Errorf("%w: width %d for nodes that fit in %d", ErrMalformed, width, cover)
	}
	for len(t.nodes) < width { // grow as AddLeaf does
		t.nodes = append(t.nodes, make([]*message.Node, len(t.nodes)+1)...)
		if t.hashes != nil {
			t.hashes = append(t.hashes, make([][]byte, len(t.hashes)+1)...)
		}
	}
	for _, c := range changes {
		x, n := c.Index, c.Node
		if uint64(x) >= uint64(len(t.nodes)) {
			return fmt.Errorf("%w: node %d beyond width %d", ErrMalformed, x, len(t.nodes))
		}
		var err error
		switch {
		case x.IsLeaf() && (n == nil || n.Type == message.NodeLeaf && n.Leaf != nil):
			l, _ := x.Leaf()
			var leaf *message.LeafNode
			if n != nil {
				leaf = n.Leaf
			}
			err = t.SetLeaf(l, leaf)
		case !x.IsLeaf() && (n == nil || n.Type == message.NodeParent && n.Parent != nil):
			var p *message.ParentNode
			if n != nil {
				p = n.Parent
			}
			err = t.SetParent(x, p)
		default:
			err = fmt.Errorf("%w: node %d has type %d", ErrMalformed, x, n.Type)
		}
		if err != nil {
			return err
		}
	}
	for len(t.nodes) > width {
		half := (len(t.nodes) - 1) / 2
		for i, n := range t.nodes[half+1:] {
			if n != nil {
				return fmt.Errorf("%w: node %d beyond width %d is not blank", ErrMalformed, half+1+i, width)
			}
		}
		t.nodes = t.nodes[:half]
		if t.hashes != nil {
			t.hashes = t.hashes[:half]
		}
	}
	return nil
}

// fullWidth returns the width of the smallest full tree (2^(d+1)−1 nodes)
// of at least n nodes.
func fullWidth(n int) int {
	w := 1
	for w < n {
		w = 2*w + 1
	}
	return w
}
