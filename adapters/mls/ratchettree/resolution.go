package ratchettree

import (
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// Resolution returns the resolution of node x (§4.1.1): x itself and its
// unmerged leaves when x is non-blank, nothing for a blank leaf, and the
// resolutions of both children for a blank parent. Out-of-range x has an
// empty resolution.
func (t *Tree) Resolution(x treemath.NodeIndex) []treemath.NodeIndex {
	return t.resolution(x, nil)
}

// ResolutionExcluding is Resolution with the leaves in exclude left out
// (for new members added by the same commit, §7.6).
func (t *Tree) ResolutionExcluding(x treemath.NodeIndex, exclude map[treemath.LeafIndex]bool) []treemath.NodeIndex {
	return t.resolution(x, exclude)
}

func (t *Tree) resolution(x treemath.NodeIndex, exclude map[treemath.LeafIndex]bool) []treemath.NodeIndex {
	if uint64(x) >= uint64(len(t.nodes)) {
		return nil
	}
	n := t.nodes[x]
	if x.IsLeaf() {
		l, _ := x.Leaf()
		if n == nil || exclude[l] {
			return nil
		}
		return []treemath.NodeIndex{x}
	}
	if n == nil {
		left, _ := treemath.Left(x)
		right, _ := treemath.Right(x, t.LeafCount())
		return append(t.resolution(left, exclude), t.resolution(right, exclude)...)
	}
	res := []treemath.NodeIndex{x}
	for _, u := range n.Parent.UnmergedLeaves {
		if !exclude[treemath.LeafIndex(u)] {
			res = append(res, treemath.LeafIndex(u).Node())
		}
	}
	return res
}

// FilteredDirectPath returns the direct path of leaf l without the nodes
// whose copath child has an empty resolution (§4.1.2), from the bottom up.
// It returns nil for a leaf outside the tree.
func (t *Tree) FilteredDirectPath(l treemath.LeafIndex) []treemath.NodeIndex {
	return t.filteredDirectPath(l, nil)
}

// FilteredDirectPathExcluding is FilteredDirectPath computed with the leaves
// in exclude left out of the copath resolutions.
func (t *Tree) FilteredDirectPathExcluding(l treemath.LeafIndex, exclude map[treemath.LeafIndex]bool) []treemath.NodeIndex {
	return t.filteredDirectPath(l, exclude)
}

func (t *Tree) filteredDirectPath(l treemath.LeafIndex, exclude map[treemath.LeafIndex]bool) []treemath.NodeIndex {
	n := t.LeafCount()
	x := l.Node()
	if uint64(x) >= uint64(len(t.nodes)) {
		return nil
	}
	dp := treemath.DirectPath(x, n)
	cp := treemath.Copath(x, n)
	out := make([]treemath.NodeIndex, 0, len(dp))
	for i, p := range dp {
		if t.resolutionSize(cp[i], exclude) > 0 {
			out = append(out, p)
		}
	}
	return out
}

// ResolutionSizeExcluding returns len(ResolutionExcluding(x, exclude))
// without building the resolution.
func (t *Tree) ResolutionSizeExcluding(x treemath.NodeIndex, exclude map[treemath.LeafIndex]bool) int {
	return t.resolutionSize(x, exclude)
}

func (t *Tree) resolutionSize(x treemath.NodeIndex, exclude map[treemath.LeafIndex]bool) int {
	if uint64(x) >= uint64(len(t.nodes)) {
		return 0
	}
	n := t.nodes[x]
	if x.IsLeaf() {
		l, _ := x.Leaf()
		if n == nil || exclude[l] {
			return 0
		}
		return 1
	}
	if n == nil {
		left, _ := treemath.Left(x)
		right, _ := treemath.Right(x, t.LeafCount())
		return t.resolutionSize(left, exclude) + t.resolutionSize(right, exclude)
	}
	size := 1
	for _, u := range n.Parent.UnmergedLeaves {
		if !exclude[treemath.LeafIndex(u)] {
			size++
		}
	}
	return size
}

// subtreeHas reports whether leaf l lies in the subtree rooted at x.
func subtreeHas(x treemath.NodeIndex, l treemath.LeafIndex) bool {
	k := x.Level()
	lo := uint64(x) - (uint64(1)<<k - 1)
	hi := uint64(x) + (uint64(1)<<k - 1)
	ln := uint64(l.Node())
	return ln >= lo && ln <= hi
}
