package message

import (
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
)

// NodeType tells a leaf node from a parent node (§7.8).
type NodeType uint8

// Node types.
const (
	NodeLeaf   NodeType = 1
	NodeParent NodeType = 2
)

// ParentNode is an interior node of the ratchet tree (§7.1).
type ParentNode struct {
	EncryptionKey  []byte
	ParentHash     []byte
	UnmergedLeaves []uint32
}

// MarshalMLS writes the ParentNode.
func (p *ParentNode) MarshalMLS(w *codec.Writer) {
	w.Opaque(p.EncryptionKey)
	w.Opaque(p.ParentHash)
	w.Vector(func(w *codec.Writer) {
		for _, l := range p.UnmergedLeaves {
			w.Uint32(l)
		}
	})
}

// UnmarshalMLS reads a ParentNode.
func (p *ParentNode) UnmarshalMLS(r *codec.Reader) {
	p.EncryptionKey = r.Opaque()
	p.ParentHash = r.Opaque()
	p.UnmergedLeaves = []uint32{}
	r.VectorEach(func(s *codec.Reader) { p.UnmergedLeaves = append(p.UnmergedLeaves, s.Uint32()) })
}

// Node is a non-blank node of the ratchet tree: exactly one of Leaf and
// Parent is set, as Type says.
type Node struct {
	Type   NodeType
	Leaf   *LeafNode
	Parent *ParentNode
}

// MarshalMLS writes the Node.
func (n *Node) MarshalMLS(w *codec.Writer) {
	w.Uint8(uint8(n.Type))
	switch {
	case n.Type == NodeLeaf && n.Leaf != nil:
		n.Leaf.MarshalMLS(w)
	case n.Type == NodeParent && n.Parent != nil:
		n.Parent.MarshalMLS(w)
	default:
		w.Fail(fmt.Errorf("%w: node type %d without its body", ErrUnknownType, n.Type))
	}
}

// UnmarshalMLS reads a Node.
func (n *Node) UnmarshalMLS(r *codec.Reader) {
	n.Type = NodeType(r.Uint8())
	switch n.Type {
	case NodeLeaf:
		n.Leaf = new(LeafNode)
		r.Value(n.Leaf)
	case NodeParent:
		n.Parent = new(ParentNode)
		r.Value(n.Parent)
	default:
		r.Fail(fmt.Errorf("%w: node type %d", ErrUnknownType, n.Type))
	}
}

// RatchetTree is the content of the ratchet_tree extension (§12.4.3.3):
// the tree's nodes in array order, nil for a blank node.
type RatchetTree []*Node

// MarshalMLS writes optional<Node> ratchet_tree<V>.
func (t RatchetTree) MarshalMLS(w *codec.Writer) {
	w.Vector(func(w *codec.Writer) {
		for _, n := range t {
			w.Bool(n != nil)
			if n != nil {
				n.MarshalMLS(w)
			}
		}
	})
}

// UnmarshalMLS reads optional<Node> ratchet_tree<V>.
func (t *RatchetTree) UnmarshalMLS(r *codec.Reader) {
	*t = RatchetTree{}
	r.VectorEach(func(s *codec.Reader) {
		var n *Node
		if s.Bool() {
			n = new(Node)
			s.Value(n)
		}
		*t = append(*t, n)
	})
}
