package group

import (
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// open unprotects m for the current epoch and verifies its signature with
// the sender's leaf key (§6.2, §6.3). Only member senders are supported.
func (g *Group) open(m *framing.MLSMessage) (*framing.AuthenticatedContent, error) {
	var (
		groupID []byte
		epoch   uint64
	)
	switch {
	case m.WireFormat == framing.WirePublicMessage && m.Public != nil:
		groupID, epoch = m.Public.Content.GroupID, m.Public.Content.Epoch
	case m.WireFormat == framing.WirePrivateMessage && m.Private != nil:
		groupID, epoch = m.Private.GroupID, m.Private.Epoch
	default:
		return nil, invalid("wire format %d is not a group message", m.WireFormat)
	}
	if string(groupID) != string(g.gc.GroupID) {
		return nil, fmt.Errorf("%w: %x", ErrWrongGroup, groupID)
	}
	if epoch != g.gc.Epoch {
		return nil, &EpochError{MessageEpoch: epoch, GroupEpoch: g.gc.Epoch}
	}
	var ac *framing.AuthenticatedContent
	var err error
	if m.Public != nil {
		if m.Public.Content.Sender.Type != framing.SenderMember {
			return nil, fmt.Errorf("%w: sender type %d", ErrUnsupported, m.Public.Content.Sender.Type)
		}
		ac, err = m.Public.Unprotect(g.suite, g.epoch.MembershipKey, g.gcBytes)
	} else {
		ac, err = framing.Decrypt(g.suite, m.Private, g.secrets, g.epoch.SenderDataSecret)
	}
	if errors.Is(err, framing.ErrDecrypt) {
		return nil, fmt.Errorf("%w: %w", ErrUndecryptable, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	leaf := g.tree.Leaf(treemath.LeafIndex(ac.Content.Sender.LeafIndex))
	if leaf == nil {
		return nil, invalid("sender leaf %d is blank", ac.Content.Sender.LeafIndex)
	}
	if err := ac.Verify(g.suite, leaf.SignatureKey, g.gcBytes); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return ac, nil
}

// HandleProposal verifies a proposal message of the current epoch and
// caches it, so that a later commit can include it by reference (§12.4).
func (g *Group) HandleProposal(m *framing.MLSMessage) error {
	ac, err := g.open(m)
	if err != nil {
		return err
	}
	if ac.Content.ContentType != framing.ContentProposal {
		return invalid("content type %d is not a proposal", ac.Content.ContentType)
	}
	ref, err := ac.ProposalRef(g.suite)
	if err != nil {
		return err
	}
	g.proposals = append(g.proposals, cached{ref: ref, proposal: ac.Content.Proposal, sender: ac.Content.Sender})
	return nil
}

// Unprotect opens an application message of the current epoch and returns
// its data and sender leaf.
func (g *Group) Unprotect(m *framing.MLSMessage) ([]byte, treemath.LeafIndex, error) {
	ac, err := g.open(m)
	if err != nil {
		return nil, 0, err
	}
	if ac.Content.ContentType != framing.ContentApplication {
		return nil, 0, invalid("content type %d is not application data", ac.Content.ContentType)
	}
	return ac.Content.Application, treemath.LeafIndex(ac.Content.Sender.LeafIndex), nil
}
