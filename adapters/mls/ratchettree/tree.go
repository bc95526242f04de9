// Package ratchettree implements the public state of the MLS ratchet tree
// (RFC 9420 §4, §7): leaf and parent nodes in array order, resolutions,
// filtered direct paths, unmerged leaves, the tree hash (§7.8), parent
// hashes (§7.9), adding, updating and removing leaves with extension and
// truncation (§7.7), and validation of a received tree (§7.9.2, §12.4.3.3).
//
// # Shape
//
// An RFC 9420 tree is always full: it has 2^d leaves and 2^(d+1)-1 nodes.
// [Import] accepts the ratchet_tree extension form (trailing blank nodes
// omitted, last node non-blank) and pads it; [Tree.Export] drops trailing
// blanks again.
//
// # Tree hashes
//
// A Tree caches the tree hash of every subtree it has hashed and drops the
// cached hashes on the path of each node it changes, so a commit rehashes
// only the nodes it touched. Nodes handed out by [Tree.Node], [Tree.Leaf]
// and [Tree.ParentNode] belong to the tree: change them only through its
// methods. Because reads fill the cache, a Tree is not safe for concurrent
// use, even by readers only.
//
// # Storage
//
// A Tree records which nodes change after [Tree.MarkStored], so that a
// caller storing a tree in parts rewrites only those ([Tree.Changes]);
// [Tree.Patch] applies such changes to a copy of the stored tree. Clones
// carry the record along.
//
// # Private keys
//
// A Tree holds only public data. Private keys live with the member's
// TreeKEM state (package treekem).
//
// # Errors
//
// Malformed trees fail with [ErrMalformed]; validation failures wrap
// [ErrInvalid] with the offending node. No method panics on any tree that
// [Import] accepted, nor on out-of-range indices.
package ratchettree

import (
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// Sentinel errors.
var (
	// ErrMalformed means the tree's shape or node types are wrong.
	ErrMalformed = errors.New("ratchettree: malformed tree")
	// ErrInvalid means the tree fails a §7.9.2 or §12.4.3.3 check.
	ErrInvalid = errors.New("ratchettree: invalid tree")
	// ErrOutOfRange means an index is outside the tree or names the wrong kind of node.
	ErrOutOfRange = errors.New("ratchettree: index out of range")
)

// Tree is a ratchet tree's public state. The zero value is not usable; use
// [New] or [Import].
type Tree struct {
	suite *ciphersuite.Suite
	nodes []*message.Node // len = 2^(d+1)-1; nil is blank
	// hashes[x] is the tree hash of the subtree at x, nil until computed
	// or after a change below x; nil or len(nodes) long.
	hashes [][]byte
	// store tracks the changes since the tree was last stored; nil when
	// it never was.
	store *stored
}

// New returns a one-leaf tree holding leaf, as a group's creator starts.
func New(s *ciphersuite.Suite, leaf *message.LeafNode) *Tree {
	return &Tree{suite: s, nodes: []*message.Node{{Type: message.NodeLeaf, Leaf: leaf}}}
}

// maxNodes bounds an imported tree (2^31-1 nodes, MaxLeaves/... leaves).
const maxNodes = 1<<31 - 1

// Import builds a tree from the ratchet_tree extension (§12.4.3.3): the last
// node must be non-blank, even entries must be leaves and odd entries parent
// nodes; the tree is padded with blanks to a full tree.
func Import(s *ciphersuite.Suite, rt message.RatchetTree) (*Tree, error) {
	if len(rt) == 0 || rt[len(rt)-1] == nil {
		return nil, fmt.Errorf("%w: empty tree or last node blank", ErrMalformed)
	}
	if len(rt) > maxNodes {
		return nil, fmt.Errorf("%w: %d nodes", ErrMalformed, len(rt))
	}
	width := 1
	for width < len(rt) {
		width = 2*width + 1
	}
	nodes := make([]*message.Node, width)
	for i, n := range rt {
		if n == nil {
			continue
		}
		want := message.NodeLeaf
		if i%2 == 1 {
			want = message.NodeParent
		}
		if n.Type != want || (want == message.NodeLeaf && n.Leaf == nil) || (want == message.NodeParent && n.Parent == nil) {
			return nil, fmt.Errorf("%w: node %d has type %d", ErrMalformed, i, n.Type)
		}
		nodes[i] = n
	}
	return &Tree{suite: s, nodes: nodes}, nil
}

// Export returns the tree in ratchet_tree extension form, without trailing
// blank nodes. The nodes are shared with the tree.
func (t *Tree) Export() message.RatchetTree {
	end := len(t.nodes)
	for end > 0 && t.nodes[end-1] == nil {
		end--
	}
	return append(message.RatchetTree{}, t.nodes[:end]...)
}

// Clone returns a copy of the tree, safe to modify independently through
// its methods. Leaf nodes are shared: a tree replaces a leaf, never
// modifies one, so an unchanged leaf stays the same pointer in every copy.
func (t *Tree) Clone() *Tree {
	c := &Tree{suite: t.suite, nodes: make([]*message.Node, len(t.nodes)), store: t.store.clone()}
	if t.hashes != nil {
		c.hashes = append([][]byte(nil), t.hashes...) // the hashes themselves are never modified
	}
	for i, n := range t.nodes {
		if n == nil {
			continue
		}
		cn := &message.Node{Type: n.Type, Leaf: n.Leaf}
		if n.Parent != nil {
			p := *n.Parent
			p.UnmergedLeaves = append([]uint32(nil), p.UnmergedLeaves...)
			cn.Parent = &p
		}
		c.nodes[i] = cn
	}
	return c
}

// Suite returns the tree's cipher suite.
func (t *Tree) Suite() *ciphersuite.Suite { return t.suite }

// LeafCount returns the number of leaves (a power of two).
func (t *Tree) LeafCount() treemath.LeafCount { return treemath.LeafCount((len(t.nodes) + 1) / 2) }

// Width returns the number of nodes.
func (t *Tree) Width() int { return len(t.nodes) }

// Root returns the root node index.
func (t *Tree) Root() treemath.NodeIndex {
	r, _ := treemath.Root(t.LeafCount())
	return r
}

// Node returns the node at x, nil when blank or out of range.
func (t *Tree) Node(x treemath.NodeIndex) *message.Node {
	if uint64(x) >= uint64(len(t.nodes)) {
		return nil
	}
	return t.nodes[x]
}

// Blank reports whether the node at x is blank (or out of range).
func (t *Tree) Blank(x treemath.NodeIndex) bool { return t.Node(x) == nil }

// Leaf returns the leaf node at leaf index l, nil when blank or out of range.
func (t *Tree) Leaf(l treemath.LeafIndex) *message.LeafNode {
	if n := t.Node(l.Node()); n != nil {
		return n.Leaf
	}
	return nil
}

// ParentNode returns the parent node at x, nil when blank, a leaf or out of range.
func (t *Tree) ParentNode(x treemath.NodeIndex) *message.ParentNode {
	if n := t.Node(x); n != nil {
		return n.Parent
	}
	return nil
}

// EncryptionKey returns the HPKE public key of the node at x, nil when blank.
func (t *Tree) EncryptionKey(x treemath.NodeIndex) []byte {
	n := t.Node(x)
	switch {
	case n == nil:
		return nil
	case n.Leaf != nil:
		return n.Leaf.EncryptionKey
	case n.Parent != nil:
		return n.Parent.EncryptionKey
	}
	return nil
}

// SetLeaf stores leaf at leaf index l (nil blanks it).
func (t *Tree) SetLeaf(l treemath.LeafIndex, leaf *message.LeafNode) error {
	if uint64(l.Node()) >= uint64(len(t.nodes)) {
		return fmt.Errorf("%w: leaf %d of %d", ErrOutOfRange, l, t.LeafCount())
	}
	t.changed(l.Node())
	t.touch(l.Node())
	if leaf == nil {
		t.nodes[l.Node()] = nil
		return nil
	}
	t.nodes[l.Node()] = &message.Node{Type: message.NodeLeaf, Leaf: leaf}
	return nil
}

// SetParent stores p at parent node x (nil blanks it).
func (t *Tree) SetParent(x treemath.NodeIndex, p *message.ParentNode) error {
	if uint64(x) >= uint64(len(t.nodes)) || x.IsLeaf() {
		return fmt.Errorf("%w: parent node %d", ErrOutOfRange, x)
	}
	t.changed(x)
	t.touch(x)
	if p == nil {
		t.nodes[x] = nil
		return nil
	}
	t.nodes[x] = &message.Node{Type: message.NodeParent, Parent: p}
	return nil
}

// SetParentHash sets the parent_hash of the non-blank parent node x.
func (t *Tree) SetParentHash(x treemath.NodeIndex, parentHash []byte) error {
	p := t.ParentNode(x)
	if p == nil {
		return fmt.Errorf("%w: parent node %d is blank or not a parent", ErrOutOfRange, x)
	}
	t.changed(x)
	t.touch(x)
	p.ParentHash = parentHash
	return nil
}

// changed drops the cached hashes of x and of every node above it.
func (t *Tree) changed(x treemath.NodeIndex) {
	if t.hashes == nil {
		return
	}
	t.hashes[x] = nil
	for _, p := range treemath.DirectPath(x, t.LeafCount()) {
		t.hashes[p] = nil
	}
}

// Members returns the indices of the non-blank leaves in order.
func (t *Tree) Members() []treemath.LeafIndex {
	var out []treemath.LeafIndex
	for i := 0; i < len(t.nodes); i += 2 {
		if t.nodes[i] != nil {
			out = append(out, treemath.LeafIndex(i/2))
		}
	}
	return out
}
