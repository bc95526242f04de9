package group

import (
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// SelfRemove is a draft proposal (draft-ietf-mls-extensions, "SelfRemove
// Proposal"): a member proposes its own removal and any other member's
// commit includes it by reference. Its code point, 0x000a, is the draft's
// suggestion (COMP-304). It is used only in a self-remove-capable group,
// one whose every member lists the type in its capabilities.

// selfRemoveCapable reports whether every member of tree lists SelfRemove
// among its supported proposal types.
func selfRemoveCapable(tree *ratchettree.Tree) bool {
	for _, l := range tree.Members() {
		if !slices.Contains(tree.Leaf(l).Capabilities.Proposals, message.ProposalSelfRemove) {
			return false
		}
	}
	return true
}

// SelfRemoveCapable reports whether the group is self-remove-capable:
// every member supports the draft SelfRemove proposal.
func (g *Group) SelfRemoveCapable() bool { return selfRemoveCapable(g.tree) }

// ProposeSelfRemove proposes this member's own removal as a SelfRemove, a
// PublicMessage (the draft requires it, so that external joiners can read
// it), at most once per epoch; the group must be self-remove-capable.
func (g *Group) ProposeSelfRemove() (*framing.MLSMessage, error) {
	if g.Public() {
		return nil, errPublic
	}
	if !g.SelfRemoveCapable() {
		return nil, fmt.Errorf("%w: SelfRemove in a group not every member of which supports it", ErrUnsupported)
	}
	for _, p := range g.proposals {
		if p.proposal.Type == message.ProposalSelfRemove && p.sender.Type == framing.SenderMember && p.sender.LeafIndex == uint32(g.priv.Leaf()) {
			return nil, invalid("SelfRemove already proposed in epoch %d", g.gc.Epoch)
		}
	}
	return g.Propose(&message.Proposal{Type: message.ProposalSelfRemove, SelfRemove: &message.SelfRemove{}}, framing.WirePublicMessage)
}

// checkSelfRemoveReceived applies the draft's rules to a received
// SelfRemove proposal: a member sends it, as a PublicMessage.
func checkSelfRemoveReceived(ac *framing.AuthenticatedContent) error {
	if ac.Content.Proposal == nil || ac.Content.Proposal.Type != message.ProposalSelfRemove {
		return nil
	}
	if ac.Content.Sender.Type != framing.SenderMember {
		return invalid("SelfRemove from sender type %d", ac.Content.Sender.Type)
	}
	if ac.WireFormat != framing.WirePublicMessage {
		return invalid("SelfRemove sent as wire format %d, not a PublicMessage", ac.WireFormat)
	}
	return nil
}

// applySelfRemoves removes the senders of a commit's SelfRemove proposals
// (after Updates, before Removes): each is included by reference, comes
// from a member other than the committer, in a self-remove-capable group,
// and removes a leaf nothing else in the commit touches.
func applySelfRemoves(tree *ratchettree.Tree, committer treemath.LeafIndex, props []cached, touched map[treemath.LeafIndex]bool, ap *applied) error {
	capable := selfRemoveCapable(tree)
	for _, p := range props {
		if p.proposal.Type != message.ProposalSelfRemove {
			continue
		}
		if !capable {
			return invalid("SelfRemove in a group that is not self-remove-capable")
		}
		if p.ref == nil {
			return invalid("SelfRemove included by value")
		}
		if p.sender.Type != framing.SenderMember {
			return invalid("SelfRemove from sender type %d", p.sender.Type)
		}
		l := treemath.LeafIndex(p.sender.LeafIndex)
		if l == committer || touched[l] || tree.Leaf(l) == nil {
			return invalid("SelfRemove of leaf %d", l)
		}
		touched[l] = true
		ap.removed = append(ap.removed, l)
		if err := tree.RemoveLeaf(l); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	return nil
}
