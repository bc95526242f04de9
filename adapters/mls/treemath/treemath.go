// Package treemath implements the array representation of MLS's
// left-balanced binary trees (RFC 9420 §4.1, Appendix C) on typed indices.
//
// # Indices
//
// A tree with n leaves has 2n-1 nodes. Leaves sit at even node indices
// (leaf i is node 2i) and parents at odd ones. [LeafIndex] and [NodeIndex]
// are distinct types so that the two numbering schemes cannot be mixed up.
//
// # Undefined results
//
// Functions whose result can be undefined (the left child of a leaf, the
// parent of the root, any node outside the tree) return ok == false instead
// of panicking. Tree sizes are counted in leaves ([LeafCount]); the
// functions accept any size up to 2^31 leaves and report ok == false beyond.
package treemath

import "math/bits"

// LeafIndex numbers the leaves of a tree from 0, left to right.
type LeafIndex uint32

// NodeIndex numbers all nodes of a tree in the array representation.
type NodeIndex uint32

// LeafCount is a number of leaves.
type LeafCount uint32

// MaxLeaves is the largest tree size the functions accept.
const MaxLeaves LeafCount = 1 << 31

// Node returns the node index of leaf l.
func (l LeafIndex) Node() NodeIndex { return NodeIndex(2 * uint64(l)) }

// Leaf returns the leaf index of node x; ok is false for a parent node.
func (x NodeIndex) Leaf() (LeafIndex, bool) {
	if x&1 != 0 {
		return 0, false
	}
	return LeafIndex(x / 2), true
}

// IsLeaf reports whether x is a leaf node.
func (x NodeIndex) IsLeaf() bool { return x&1 == 0 }

// Level returns the level of x: 0 for leaves, k for a parent whose
// subtrees each hold 2^(k-1) leaves in a full tree.
func (x NodeIndex) Level() uint {
	return uint(bits.TrailingZeros32(^uint32(x)))
}

// Width returns the number of nodes of a tree with n leaves (0 for n = 0).
func Width(n LeafCount) uint64 {
	if n == 0 {
		return 0
	}
	return 2*uint64(n) - 1
}

// valid reports whether x is a node of a tree with n leaves.
func valid(x NodeIndex, n LeafCount) bool {
	return n > 0 && n <= MaxLeaves && uint64(x) < Width(n)
}

// Root returns the root of a tree with n leaves; ok is false for n = 0 or
// n > MaxLeaves.
func Root(n LeafCount) (NodeIndex, bool) {
	if n == 0 || n > MaxLeaves {
		return 0, false
	}
	w := Width(n)
	return NodeIndex(uint64(1)<<(bits.Len64(w)-1) - 1), true
}

// Left returns the left child of x; ok is false for a leaf.
func Left(x NodeIndex) (NodeIndex, bool) {
	k := x.Level()
	if k == 0 {
		return 0, false
	}
	return x ^ (1 << (k - 1)), true
}

// Right returns the right child of x in a tree with n leaves, descending
// past children that the tree's truncated right edge does not hold; ok is
// false for a leaf or a node outside the tree.
func Right(x NodeIndex, n LeafCount) (NodeIndex, bool) {
	if !valid(x, n) {
		return 0, false
	}
	k := x.Level()
	if k == 0 {
		return 0, false
	}
	r := uint64(x) ^ (3 << (k - 1))
	for r >= Width(n) {
		l, ok := Left(NodeIndex(r))
		if !ok {
			return 0, false
		}
		r = uint64(l)
	}
	return NodeIndex(r), true
}

// parentStep returns the parent of x in an infinite tree.
func parentStep(x NodeIndex) uint64 {
	k := x.Level()
	b := (uint64(x) >> (k + 1)) & 1
	return (uint64(x) | 1<<k) ^ (b << (k + 1))
}

// Parent returns the parent of x in a tree with n leaves; ok is false for
// the root and for nodes outside the tree.
func Parent(x NodeIndex, n LeafCount) (NodeIndex, bool) {
	if !valid(x, n) {
		return 0, false
	}
	root, _ := Root(n)
	if x == root {
		return 0, false
	}
	p := parentStep(x)
	for p >= Width(n) {
		p = parentStep(NodeIndex(p))
	}
	return NodeIndex(p), true
}

// Sibling returns the other child of x's parent; ok is false for the root
// and for nodes outside the tree.
func Sibling(x NodeIndex, n LeafCount) (NodeIndex, bool) {
	p, ok := Parent(x, n)
	if !ok {
		return 0, false
	}
	l, _ := Left(p)
	if x < p {
		return Right(p, n)
	}
	return l, true
}

// DirectPath returns the parents of x from its parent up to the root (empty
// for the root; nil for a node outside the tree).
func DirectPath(x NodeIndex, n LeafCount) []NodeIndex {
	if !valid(x, n) {
		return nil
	}
	path := []NodeIndex{}
	for p, ok := Parent(x, n); ok; p, ok = Parent(p, n) {
		path = append(path, p)
	}
	return path
}

// Copath returns the siblings of x and of each node of its direct path
// except the root, from the bottom up.
func Copath(x NodeIndex, n LeafCount) []NodeIndex {
	if !valid(x, n) {
		return nil
	}
	dp := DirectPath(x, n)
	if len(dp) == 0 {
		return []NodeIndex{}
	}
	nodes := append([]NodeIndex{x}, dp[:len(dp)-1]...)
	cp := make([]NodeIndex, 0, len(nodes))
	for _, y := range nodes {
		s, _ := Sibling(y, n)
		cp = append(cp, s)
	}
	return cp
}

// IsAncestor reports whether a is a proper ancestor of x in a tree with n leaves.
func IsAncestor(a, x NodeIndex, n LeafCount) bool {
	for p, ok := Parent(x, n); ok; p, ok = Parent(p, n) {
		if p == a {
			return true
		}
	}
	return false
}

// CommonAncestor returns the lowest common ancestor of x and y in the
// infinite tree, which is also theirs in any tree holding both.
func CommonAncestor(x, y NodeIndex) NodeIndex {
	kx, ky := x.Level()+1, y.Level()+1
	if kx <= ky && uint64(x)>>ky == uint64(y)>>ky {
		return y
	}
	if ky <= kx && uint64(x)>>kx == uint64(y)>>kx {
		return x
	}
	xn, yn := uint64(x), uint64(y)
	k := uint(0)
	for xn != yn {
		xn >>= 1
		yn >>= 1
		k++
	}
	return NodeIndex(xn<<k | (1<<(k-1) - 1))
}

// LeafCountFor returns the smallest power of two ≥ n, the leaf count of the
// full tree that a tree of n leaves is padded to for hashing (§7.8); ok is
// false beyond MaxLeaves.
func LeafCountFor(n LeafCount) (LeafCount, bool) {
	if n > MaxLeaves {
		return 0, false
	}
	if n <= 1 {
		return 1, true
	}
	return LeafCount(1) << bits.Len32(uint32(n-1)), true
}
