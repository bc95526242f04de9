package message

import (
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
)

// ProposalType identifies a proposal (§12.1).
type ProposalType uint16

// Proposal types defined by RFC 9420.
const (
	ProposalAdd                    ProposalType = 1
	ProposalUpdate                 ProposalType = 2
	ProposalRemove                 ProposalType = 3
	ProposalPreSharedKey           ProposalType = 4
	ProposalReInit                 ProposalType = 5
	ProposalExternalInit           ProposalType = 6
	ProposalGroupContextExtensions ProposalType = 7
	// ProposalSelfRemove is SelfRemove of draft-ietf-mls-extensions, at
	// the code point the draft suggests (0x000a); not an RFC 9420 type and
	// not yet assigned by IANA (COMP-304).
	ProposalSelfRemove ProposalType = 0x000a
)

// Add proposes adding the owner of KeyPackage (§12.1.1).
type Add struct{ KeyPackage KeyPackage }

// Update proposes replacing the sender's leaf (§12.1.2).
type Update struct{ LeafNode LeafNode }

// Remove proposes removing the member at leaf Removed (§12.1.3).
type Remove struct{ Removed uint32 }

// PreSharedKey proposes injecting a PSK into the key schedule (§12.1.4).
type PreSharedKey struct{ PSK PreSharedKeyID }

// ReInit proposes closing the group and re-creating it (§12.1.5).
type ReInit struct {
	GroupID     []byte
	Version     ProtocolVersion
	CipherSuite ciphersuite.ID
	Extensions  Extensions
}

// ExternalInit carries an external joiner's KEM output (§12.1.6).
type ExternalInit struct{ KEMOutput []byte }

// GroupContextExtensions proposes new group context extensions (§12.1.7).
type GroupContextExtensions struct{ Extensions Extensions }

// SelfRemove proposes removing the proposal's own sender (draft
// SelfRemove: an empty body; the sender's leaf names the member).
type SelfRemove struct{}

// MarshalMLS writes the empty SelfRemove body.
func (*SelfRemove) MarshalMLS(*codec.Writer) {}

// UnmarshalMLS reads the empty SelfRemove body.
func (*SelfRemove) UnmarshalMLS(*codec.Reader) {}

// MarshalMLS writes the Add body.
func (p *Add) MarshalMLS(w *codec.Writer) { p.KeyPackage.MarshalMLS(w) }

// UnmarshalMLS reads an Add body.
func (p *Add) UnmarshalMLS(r *codec.Reader) { r.Value(&p.KeyPackage) }

// MarshalMLS writes the Update body.
func (p *Update) MarshalMLS(w *codec.Writer) { p.LeafNode.MarshalMLS(w) }

// UnmarshalMLS reads an Update body.
func (p *Update) UnmarshalMLS(r *codec.Reader) { r.Value(&p.LeafNode) }

// MarshalMLS writes the Remove body.
func (p *Remove) MarshalMLS(w *codec.Writer) { w.Uint32(p.Removed) }

// UnmarshalMLS reads a Remove body.
func (p *Remove) UnmarshalMLS(r *codec.Reader) { p.Removed = r.Uint32() }

// MarshalMLS writes the PreSharedKey body.
func (p *PreSharedKey) MarshalMLS(w *codec.Writer) { p.PSK.MarshalMLS(w) }

// UnmarshalMLS reads a PreSharedKey body.
func (p *PreSharedKey) UnmarshalMLS(r *codec.Reader) { r.Value(&p.PSK) }

// MarshalMLS writes the ReInit body.
func (p *ReInit) MarshalMLS(w *codec.Writer) {
	w.Opaque(p.GroupID)
	w.Uint16(uint16(p.Version))
	w.Uint16(uint16(p.CipherSuite))
	p.Extensions.MarshalMLS(w)
}

// UnmarshalMLS reads a ReInit body.
func (p *ReInit) UnmarshalMLS(r *codec.Reader) {
	p.GroupID = r.Opaque()
	p.Version = ProtocolVersion(r.Uint16())
	p.CipherSuite = ciphersuite.ID(r.Uint16())
	r.Value(&p.Extensions)
}

// MarshalMLS writes the ExternalInit body.
func (p *ExternalInit) MarshalMLS(w *codec.Writer) { w.Opaque(p.KEMOutput) }

// UnmarshalMLS reads an ExternalInit body.
func (p *ExternalInit) UnmarshalMLS(r *codec.Reader) { p.KEMOutput = r.Opaque() }

// MarshalMLS writes the GroupContextExtensions body.
func (p *GroupContextExtensions) MarshalMLS(w *codec.Writer) { p.Extensions.MarshalMLS(w) }

// UnmarshalMLS reads a GroupContextExtensions body.
func (p *GroupContextExtensions) UnmarshalMLS(r *codec.Reader) { r.Value(&p.Extensions) }

// Proposal is one proposal (§12.1): Type selects which one body field is set.
type Proposal struct {
	Type                   ProposalType
	Add                    *Add
	Update                 *Update
	Remove                 *Remove
	PreSharedKey           *PreSharedKey
	ReInit                 *ReInit
	ExternalInit           *ExternalInit
	GroupContextExtensions *GroupContextExtensions
	SelfRemove             *SelfRemove
}

// MarshalMLS writes the Proposal; a Type whose body is nil is an error.
func (p *Proposal) MarshalMLS(w *codec.Writer) {
	w.Uint16(uint16(p.Type))
	var body codec.Marshaler
	switch {
	case p.Type == ProposalAdd && p.Add != nil:
		body = p.Add
	case p.Type == ProposalUpdate && p.Update != nil:
		body = p.Update
	case p.Type == ProposalRemove && p.Remove != nil:
		body = p.Remove
	case p.Type == ProposalPreSharedKey && p.PreSharedKey != nil:
		body = p.PreSharedKey
	case p.Type == ProposalReInit && p.ReInit != nil:
		body = p.ReInit
	case p.Type == ProposalExternalInit && p.ExternalInit != nil:
		body = p.ExternalInit
	case p.Type == ProposalGroupContextExtensions && p.GroupContextExtensions != nil:
		body = p.GroupContextExtensions
	case p.Type == ProposalSelfRemove && p.SelfRemove != nil:
		body = p.SelfRemove
	default:
		w.Fail(fmt.Errorf("%w: proposal type %d without its body", ErrUnknownType, p.Type))
		return
	}
	body.MarshalMLS(w)
}

// UnmarshalMLS reads a Proposal.
func (p *Proposal) UnmarshalMLS(r *codec.Reader) {
	*p = Proposal{Type: ProposalType(r.Uint16())}
	if r.Err() != nil {
		return
	}
	switch p.Type {
	case ProposalAdd:
		p.Add = new(Add)
		r.Value(p.Add)
	case ProposalUpdate:
		p.Update = new(Update)
		r.Value(p.Update)
	case ProposalRemove:
		p.Remove = new(Remove)
		r.Value(p.Remove)
	case ProposalPreSharedKey:
		p.PreSharedKey = new(PreSharedKey)
		r.Value(p.PreSharedKey)
	case ProposalReInit:
		p.ReInit = new(ReInit)
		r.Value(p.ReInit)
	case ProposalExternalInit:
		p.ExternalInit = new(ExternalInit)
		r.Value(p.ExternalInit)
	case ProposalGroupContextExtensions:
		p.GroupContextExtensions = new(GroupContextExtensions)
		r.Value(p.GroupContextExtensions)
	case ProposalSelfRemove:
		p.SelfRemove = new(SelfRemove)
	default:
		r.Fail(fmt.Errorf("%w: proposal type %d", ErrUnknownType, p.Type))
	}
}
