package message

import (
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
)

// ProposalOrRefType tells an inline proposal from a reference (§12.4).
type ProposalOrRefType uint8

// ProposalOrRef types.
const (
	ProposalInline    ProposalOrRefType = 1
	ProposalReference ProposalOrRefType = 2
)

// ProposalOrRef is a proposal carried in a commit, inline or by ProposalRef.
type ProposalOrRef struct {
	Type      ProposalOrRefType
	Proposal  *Proposal
	Reference []byte
}

// MarshalMLS writes the ProposalOrRef.
func (p *ProposalOrRef) MarshalMLS(w *codec.Writer) {
	w.Uint8(uint8(p.Type))
	switch {
	case p.Type == ProposalInline && p.Proposal != nil:
		p.Proposal.MarshalMLS(w)
	case p.Type == ProposalReference:
		w.Opaque(p.Reference)
	default:
		w.Fail(fmt.Errorf("%w: proposal-or-ref type %d", ErrUnknownType, p.Type))
	}
}

// UnmarshalMLS reads a ProposalOrRef.
func (p *ProposalOrRef) UnmarshalMLS(r *codec.Reader) {
	p.Type = ProposalOrRefType(r.Uint8())
	switch p.Type {
	case ProposalInline:
		p.Proposal = new(Proposal)
		r.Value(p.Proposal)
	case ProposalReference:
		p.Reference = r.Opaque()
	default:
		r.Fail(fmt.Errorf("%w: proposal-or-ref type %d", ErrUnknownType, p.Type))
	}
}

// UpdatePathNode carries one new node key and the path secret encrypted to
// the resolution of the copath node (§7.6).
type UpdatePathNode struct {
	EncryptionKey       []byte
	EncryptedPathSecret []HPKECiphertext
}

// MarshalMLS writes the UpdatePathNode.
func (n *UpdatePathNode) MarshalMLS(w *codec.Writer) {
	w.Opaque(n.EncryptionKey)
	w.Vector(func(w *codec.Writer) {
		for i := range n.EncryptedPathSecret {
			n.EncryptedPathSecret[i].MarshalMLS(w)
		}
	})
}

// UnmarshalMLS reads an UpdatePathNode.
func (n *UpdatePathNode) UnmarshalMLS(r *codec.Reader) {
	n.EncryptionKey = r.Opaque()
	n.EncryptedPathSecret = []HPKECiphertext{}
	r.VectorEach(func(s *codec.Reader) {
		var c HPKECiphertext
		c.UnmarshalMLS(s)
		n.EncryptedPathSecret = append(n.EncryptedPathSecret, c)
	})
}

// UpdatePath is the committer's new leaf and direct-path keys (§7.6).
type UpdatePath struct {
	LeafNode LeafNode
	Nodes    []UpdatePathNode
}

// MarshalMLS writes the UpdatePath.
func (p *UpdatePath) MarshalMLS(w *codec.Writer) {
	p.LeafNode.MarshalMLS(w)
	w.Vector(func(w *codec.Writer) {
		for i := range p.Nodes {
			p.Nodes[i].MarshalMLS(w)
		}
	})
}

// UnmarshalMLS reads an UpdatePath.
func (p *UpdatePath) UnmarshalMLS(r *codec.Reader) {
	r.Value(&p.LeafNode)
	p.Nodes = []UpdatePathNode{}
	r.VectorEach(func(s *codec.Reader) {
		var n UpdatePathNode
		n.UnmarshalMLS(s)
		p.Nodes = append(p.Nodes, n)
	})
}

// Commit applies proposals and optionally refreshes the committer's path
// (§12.4).
type Commit struct {
	Proposals []ProposalOrRef
	Path      *UpdatePath
}

// MarshalMLS writes the Commit.
func (c *Commit) MarshalMLS(w *codec.Writer) {
	w.Vector(func(w *codec.Writer) {
		for i := range c.Proposals {
			c.Proposals[i].MarshalMLS(w)
		}
	})
	w.Bool(c.Path != nil)
	if c.Path != nil {
		c.Path.MarshalMLS(w)
	}
}

// UnmarshalMLS reads a Commit.
func (c *Commit) UnmarshalMLS(r *codec.Reader) {
	c.Proposals = []ProposalOrRef{}
	r.VectorEach(func(s *codec.Reader) {
		var p ProposalOrRef
		p.UnmarshalMLS(s)
		c.Proposals = append(c.Proposals, p)
	})
	c.Path = nil
	if r.Bool() {
		c.Path = new(UpdatePath)
		r.Value(c.Path)
	}
}
