package group

import (
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// externalSenderAllowed reports whether an external sender may send a
// proposal of type t (§12.1.8: add, remove, psk, reinit,
// group_context_extensions; the "Ext" column of the registry).
func externalSenderAllowed(t message.ProposalType) bool {
	switch t {
	case message.ProposalAdd, message.ProposalRemove, message.ProposalPreSharedKey,
		message.ProposalReInit, message.ProposalGroupContextExtensions:
		return true
	}
	return false
}

// externalSenders decodes the external_senders extension of exts; ok is
// false when exts has none.
func externalSenders(exts message.Extensions) (senders message.ExternalSenders, ok bool, err error) {
	data, ok := exts.Find(message.ExtExternalSenders)
	if !ok {
		return nil, false, nil
	}
	if err := codec.Unmarshal(data, &senders); err != nil {
		return nil, true, fmt.Errorf("%w: external_senders: %w", ErrInvalid, err)
	}
	return senders, true, nil
}

// ExternalSenders returns the external_senders extension of the current
// group context (§12.1.8.1), nil when the group has none.
func (g *Group) ExternalSenders() (message.ExternalSenders, error) {
	s, _, err := externalSenders(g.gc.Extensions)
	return s, err
}

// checkExternalProposal validates the content of a proposal from a
// sender outside the group (§6.1, §12.1.8) and returns the key that must
// have signed it: for sender type external, the key at sender_index of the
// group's external_senders extension (proposal types of the "Ext" column
// only); for new_member_proposal, the key of the leaf of the KeyPackage of
// the Add it must carry.
func checkExternalProposal(gc *message.GroupContext, c *framing.FramedContent) ([]byte, error) {
	if c.ContentType != framing.ContentProposal || c.Proposal == nil {
		return nil, invalid("sender type %d with content type %d, want a proposal", c.Sender.Type, c.ContentType)
	}
	t := c.Proposal.Type
	switch c.Sender.Type {
	case framing.SenderExternal:
		if !externalSenderAllowed(t) {
			return nil, invalid("proposal type %d from an external sender", t)
		}
		senders, ok, err := externalSenders(gc.Extensions)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, invalid("external sender in a group without external_senders")
		}
		if int64(c.Sender.SenderIndex) >= int64(len(senders)) {
			return nil, invalid("external sender %d of %d", c.Sender.SenderIndex, len(senders))
		}
		return senders[c.Sender.SenderIndex].SignatureKey, nil
	case framing.SenderNewMemberProposal:
		if t != message.ProposalAdd || c.Proposal.Add == nil {
			return nil, invalid("new_member_proposal sender with proposal type %d, want add", t)
		}
		return c.Proposal.Add.KeyPackage.LeafNode.SignatureKey, nil
	}
	return nil, fmt.Errorf("%w: sender type %d", ErrUnsupported, c.Sender.Type)
}

// openExternalProposal verifies a proposal of the current epoch from an
// external or new_member_proposal sender: a PublicMessage without
// membership tag, signed without the group context (§6.1).
func (g *Group) openExternalProposal(pm *framing.PublicMessage, v *view) (*framing.AuthenticatedContent, error) {
	ac := pm.AuthenticatedContent()
	key, err := checkExternalProposal(&g.gc, &ac.Content)
	if err != nil {
		return nil, err
	}
	if err := ac.Verify(g.suite, key, v.gcBytes); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return ac, nil
}

// ExternalProposal signs p as a proposal of external sender senderIndex
// (§12.1.8) to the group groupID at epoch, with the private key of that
// sender's entry in external_senders; the result is a PublicMessage.
func ExternalProposal(s *ciphersuite.Suite, groupID []byte, epoch uint64, senderIndex uint32, sigPriv []byte, p *message.Proposal) (*framing.MLSMessage, error) {
	if p == nil || !externalSenderAllowed(p.Type) {
		return nil, invalid("proposal is not one an external sender may send")
	}
	return signOutside(s, groupID, epoch, framing.Sender{Type: framing.SenderExternal, SenderIndex: senderIndex}, sigPriv, p)
}

// NewMemberProposal is a joiner's own Add of kp to the group groupID at
// epoch (sender type new_member_proposal, §12.1.8), signed with the key
// of kp's leaf, whose private half sigPriv is.
func NewMemberProposal(s *ciphersuite.Suite, groupID []byte, epoch uint64, kp *message.KeyPackage, sigPriv []byte) (*framing.MLSMessage, error) {
	if kp == nil {
		return nil, invalid("no key package")
	}
	p := &message.Proposal{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *kp}}
	return signOutside(s, groupID, epoch, framing.Sender{Type: framing.SenderNewMemberProposal}, sigPriv, p)
}

func signOutside(s *ciphersuite.Suite, groupID []byte, epoch uint64, sender framing.Sender, sigPriv []byte, p *message.Proposal) (*framing.MLSMessage, error) {
	c := &framing.FramedContent{GroupID: groupID, Epoch: epoch, Sender: sender, AuthenticatedData: []byte{},
		ContentType: framing.ContentProposal, Proposal: p}
	ac, err := framing.Sign(s, framing.WirePublicMessage, c, sigPriv, nil)
	if err != nil {
		return nil, err
	}
	pm, err := framing.NewPublicMessage(s, ac, nil, nil)
	if err != nil {
		return nil, err
	}
	return &framing.MLSMessage{Version: message.MLS10, WireFormat: framing.WirePublicMessage, Public: pm}, nil
}
