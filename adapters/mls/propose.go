package mls

import (
	"context"
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/ports"
)

var _ ports.MLSProposals = (*Engine)(nil)

// Propose sends one proposal of the current epoch as a PublicMessage and
// keeps it, with the group's state, for a commit of this installation.
func (e *Engine) Propose(ctx context.Context, tx ports.Tx, groupID []byte, opts ports.ProposalOptions) ([]byte, error) {
	g, err := e.active(ctx, tx, groupID)
	if err != nil {
		return nil, err
	}
	var m *framing.MLSMessage
	switch {
	case opts.Update:
		m, err = g.ProposeUpdate(framing.WirePublicMessage)
	case opts.Remove != nil:
		m, err = g.Propose(&message.Proposal{Type: message.ProposalRemove, Remove: &message.Remove{Removed: *opts.Remove}}, framing.WirePublicMessage)
	case opts.Add != nil:
		kp, derr := decodeKeyPackage(opts.Add)
		if derr != nil {
			return nil, derr
		}
		m, err = g.Propose(&message.Proposal{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *kp}}, framing.WirePublicMessage)
	case opts.GroupContextExtensions != nil:
		m, err = g.Propose(&message.Proposal{Type: message.ProposalGroupContextExtensions,
			GroupContextExtensions: &message.GroupContextExtensions{Extensions: toExtensions(opts.GroupContextExtensions)}}, framing.WirePublicMessage)
	default:
		return nil, fmt.Errorf("propose: %w: no proposal named", ports.ErrInvalidArgument)
	}
	if err != nil {
		return nil, fmt.Errorf("propose: %w: %v", ports.ErrInvalid, err)
	}
	b, err := codec.Marshal(m)
	if err != nil {
		return nil, err
	}
	if _, err := e.save(ctx, tx, g); err != nil {
		return nil, err
	}
	return b, nil
}

// cachedProposal describes a proposal the epoch cached, for
// [ports.CommitOptions.IncludeByReference].
func cachedProposal(g *group.Group, pr *message.Proposal, s framing.Sender) ports.Proposal {
	p := ports.Proposal{Type: uint16(pr.Type), SenderType: ports.SenderType(s.Type), ByReference: true,
		Sender: ports.Member{LeafIndex: s.LeafIndex}}
	if s.Type == framing.SenderMember {
		p.Sender = toMember(s.LeafIndex, leafAt(g, s.LeafIndex))
	}
	switch {
	case pr.Type == message.ProposalAdd && pr.Add != nil:
		p.KeyPackage, _ = codec.Marshal(&pr.Add.KeyPackage)
		p.Added = toMember(ports.NoLeaf, &pr.Add.KeyPackage.LeafNode)
	case pr.Type == message.ProposalRemove && pr.Remove != nil:
		p.Removed = toMember(pr.Remove.Removed, leafAt(g, pr.Remove.Removed))
	case pr.Type == message.ProposalUpdate && pr.Update != nil:
		p.Updated = toMember(s.LeafIndex, &pr.Update.LeafNode)
	case pr.Type == message.ProposalGroupContextExtensions && pr.GroupContextExtensions != nil:
		p.Extensions = fromExtensions(pr.GroupContextExtensions.Extensions)
	}
	return p
}
