package group

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// resolve turns a commit's ProposalOrRefs into proposals with their senders.
func (g *Group) resolve(c *message.Commit, committer framing.Sender) ([]cached, error) {
	out := make([]cached, 0, len(c.Proposals))
	for i, p := range c.Proposals {
		switch p.Type {
		case message.ProposalInline:
			out = append(out, cached{proposal: p.Proposal, sender: committer})
		case message.ProposalReference:
			j := slices.IndexFunc(g.proposals, func(x cached) bool { return bytes.Equal(x.ref, p.Reference) })
			if j < 0 {
				return nil, invalid("proposal %d: unknown reference %x", i, p.Reference)
			}
			if committer.Type != framing.SenderMember && g.proposals[j].proposal.Type != message.ProposalSelfRemove {
				// An external commit names by reference only the pending
				// SelfRemove proposals (draft SelfRemove, COMP-304).
				return nil, invalid("proposal %d: reference to a proposal of type %d in an external commit", i, g.proposals[j].proposal.Type)
			}
			out = append(out, g.proposals[j])
		default:
			return nil, invalid("proposal %d: type %d", i, p.Type)
		}
	}
	return out, nil
}

// CommitProposal is one proposal of a commit as the commit resolves it.
type CommitProposal struct {
	Proposal *message.Proposal
	// Sender is the proposer: the committer for an inline proposal.
	Sender framing.Sender
	// ByReference reports a proposal the commit names by reference.
	ByReference bool
}

// commitProposals describes resolved proposals.
func commitProposals(props []cached) []CommitProposal {
	out := make([]CommitProposal, len(props))
	for i, p := range props {
		out[i] = CommitProposal{Proposal: p.proposal, Sender: p.sender, ByReference: p.ref != nil}
	}
	return out
}

// PendingProposals returns the proposals of p, a commit of this member
// for the current epoch sent as a PublicMessage, resolving references
// against the epoch's cached proposals.
//
// An external commit names no references and needs no group: g may then
// be nil.
func (g *Group) PendingProposals(p *Pending) ([]CommitProposal, error) {
	if p == nil || p.Message == nil || p.Message.Public == nil || p.Message.Public.Content.Commit == nil {
		return nil, invalid("not a commit sent as a PublicMessage")
	}
	c := &p.Message.Public.Content
	if c.Sender.Type == framing.SenderNewMemberCommit && (g == nil || !hasReference(c.Commit)) {
		var out []CommitProposal
		for i, pr := range c.Commit.Proposals {
			if pr.Type != message.ProposalInline {
				return nil, invalid("proposal %d: reference in an external commit", i)
			}
			out = append(out, CommitProposal{Proposal: pr.Proposal, Sender: c.Sender})
		}
		return out, nil
	}
	if g == nil {
		return nil, invalid("a member's commit needs the group it was built on")
	}
	props, err := g.resolve(p.Message.Public.Content.Commit, p.Message.Public.Content.Sender)
	if err != nil {
		return nil, err
	}
	return commitProposals(props), nil
}

// applied is what applying a commit's proposals produced.
type applied struct {
	extensions message.Extensions
	added      []treemath.LeafIndex
	addedKPs   []*message.KeyPackage
	kemOutput  []byte // of the ExternalInit of an external commit
	psks       []message.PreSharedKeyID
	reinit     *message.ReInit // of a commit that ends the group (§12.1.5)
	needPath   bool
	// removed are the leaves the Remove proposals removed.
	removed []treemath.LeafIndex
}

// apply validates the proposals (§12.2) and applies them to tree in the
// order of §12.3: GroupContextExtensions, Update, Remove, Add, PreSharedKey.
func (g *Group) apply(tree *ratchettree.Tree, committer treemath.LeafIndex, props []cached, external bool) (*applied, error) {
	ap := &applied{extensions: g.gc.Extensions, needPath: len(props) == 0}
	touched := map[treemath.LeafIndex]bool{}
	byType := func(t message.ProposalType) []cached {
		var out []cached
		for _, p := range props {
			if p.proposal.Type == t {
				out = append(out, p)
			}
		}
		return out
	}
	if err := checkReInit(g, props); err != nil {
		return nil, err
	}
	for _, p := range props {
		switch t := p.proposal.Type; {
		case external && t != message.ProposalExternalInit && t != message.ProposalRemove && t != message.ProposalPreSharedKey &&
			t != message.ProposalSelfRemove:
			return nil, invalid("proposal type %d in an external commit", t)
		case t == message.ProposalAdd, t == message.ProposalPreSharedKey:
		case t == message.ProposalUpdate, t == message.ProposalRemove, t == message.ProposalGroupContextExtensions:
			ap.needPath = true
		case t == message.ProposalExternalInit && external:
			if ap.kemOutput != nil {
				return nil, invalid("more than one ExternalInit proposal")
			}
			ap.kemOutput, ap.needPath = p.proposal.ExternalInit.KEMOutput, true
		case t == message.ProposalExternalInit:
			return nil, invalid("ExternalInit in a member's commit")
		case t == message.ProposalReInit && !external:
			ap.reinit = p.proposal.ReInit
		case t == message.ProposalSelfRemove:
			ap.needPath = true
		default:
			return nil, fmt.Errorf("%w: proposal type %d", ErrUnsupported, t)
		}
		if err := senderMayPropose(p, external); err != nil {
			return nil, err
		}
	}
	if external && ap.kemOutput == nil {
		return nil, invalid("external commit without ExternalInit")
	}
	if gce := byType(message.ProposalGroupContextExtensions); len(gce) > 1 {
		return nil, invalid("more than one GroupContextExtensions proposal")
	} else if len(gce) == 1 {
		ap.extensions = gce[0].proposal.GroupContextExtensions.Extensions
		if _, _, err := externalSenders(ap.extensions); err != nil {
			return nil, err
		}
		if err := allSupport(tree, ap.extensions); err != nil {
			return nil, err
		}
	}
	for _, p := range byType(message.ProposalUpdate) {
		l := treemath.LeafIndex(p.sender.LeafIndex)
		if l == committer {
			return nil, invalid("commit includes the committer's own update")
		}
		if touched[l] {
			return nil, invalid("leaf %d updated or removed twice", l)
		}
		touched[l] = true
		ln := &p.proposal.Update.LeafNode
		if err := g.checkLeaf(tree, l, ln, message.SourceUpdate); err != nil {
			return nil, err
		}
		if err := supports(ln, ap.extensions); err != nil {
			return nil, leafError(err)
		}
		if err := credentialsCompatible(tree, ln, int64(l)); err != nil {
			return nil, leafError(err)
		}
		if err := tree.UpdateLeaf(l, ln); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	if err := applySelfRemoves(tree, committer, props, touched, ap); err != nil {
		return nil, err
	}
	for _, p := range byType(message.ProposalRemove) {
		l := treemath.LeafIndex(p.proposal.Remove.Removed)
		if l == committer || touched[l] || tree.Leaf(l) == nil {
			return nil, invalid("remove of leaf %d", l)
		}
		touched[l] = true
		ap.removed = append(ap.removed, l)
		if err := tree.RemoveLeaf(l); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	for _, p := range byType(message.ProposalAdd) {
		kp := &p.proposal.Add.KeyPackage
		if err := g.checkKeyPackage(kp); err != nil {
			return nil, leafError(err)
		}
		if err := supports(&kp.LeafNode, ap.extensions); err != nil {
			return nil, leafError(err)
		}
		if err := credentialsCompatible(tree, &kp.LeafNode, -1); err != nil {
			return nil, leafError(err)
		}
		for _, m := range tree.Members() {
			other := tree.Leaf(m)
			if bytes.Equal(other.SignatureKey, kp.LeafNode.SignatureKey) || bytes.Equal(other.EncryptionKey, kp.LeafNode.EncryptionKey) {
				return nil, invalidAs(ErrLeafNode, "added key package reuses a key of leaf %d", m)
			}
		}
		l, err := tree.AddLeaf(&kp.LeafNode)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		ap.added = append(ap.added, l)
		ap.addedKPs = append(ap.addedKPs, kp)
	}
	seen := map[string]bool{}
	for _, p := range byType(message.ProposalPreSharedKey) {
		if err := g.checkPSKProposal(&p.proposal.PreSharedKey.PSK); err != nil {
			return nil, err
		}
		id, err := codec.Marshal(&p.proposal.PreSharedKey.PSK)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		if seen[string(id)] {
			return nil, invalid("the same PSK proposed twice")
		}
		seen[string(id)] = true
		ap.psks = append(ap.psks, p.proposal.PreSharedKey.PSK)
	}
	return ap, nil
}

// checkLeaf validates a leaf node about to sit at leaf l (§7.3).
func (g *Group) checkLeaf(tree *ratchettree.Tree, l treemath.LeafIndex, ln *message.LeafNode, source message.LeafNodeSource) error {
	if ln.Source != source {
		return invalidAs(ErrLeafNode, "leaf %d: source %d, want %d", l, ln.Source, source)
	}
	if err := ln.Verify(g.suite, g.gc.GroupID, uint32(l)); err != nil {
		return invalidAs(ErrLeafNode, "leaf %d: %w", l, err)
	}
	for _, m := range tree.Members() {
		other := tree.Leaf(m)
		if m != l && (bytes.Equal(other.SignatureKey, ln.SignatureKey) || bytes.Equal(other.EncryptionKey, ln.EncryptionKey)) {
			return invalidAs(ErrLeafNode, "leaf %d reuses a key of leaf %d", l, m)
		}
		if m == l && bytes.Equal(other.EncryptionKey, ln.EncryptionKey) {
			return invalidAs(ErrLeafNode, "update of leaf %d keeps its encryption key", l)
		}
	}
	return nil
}

// checkKeyPackage validates the KeyPackage of an Add (§10.1, §12.2).
func (g *Group) checkKeyPackage(kp *message.KeyPackage) error {
	if kp.Version != g.gc.Version || kp.CipherSuite != g.gc.CipherSuite {
		return invalid("key package version %d suite %#04x", kp.Version, uint16(kp.CipherSuite))
	}
	if err := kp.Verify(g.suite); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if kp.LeafNode.Source != message.SourceKeyPackage {
		return invalid("key package leaf source %d", kp.LeafNode.Source)
	}
	if err := kp.LeafNode.Verify(g.suite, nil, 0); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if bytes.Equal(kp.InitKey, kp.LeafNode.EncryptionKey) {
		return invalid("key package init key equals its encryption key")
	}
	return nil
}

// checkPSKProposal applies the rules of §12.1.4 to a PreSharedKey
// proposal of a commit: a resumption PSK of usage reinit or branch is
// injected only by the first commit of a reinitialized or branched group,
// whose Welcome names it (§11.2, §11.3), and psk_nonce is Nh bytes.
func (g *Group) checkPSKProposal(id *message.PreSharedKeyID) error {
	if id.Type == message.PSKResumption && id.Usage != message.UsageApplication && !g.resumes(id) {
		return invalid("PreSharedKey proposal of a resumption PSK with usage %d", id.Usage)
	}
	if len(id.Nonce) != g.suite.HashSize() {
		return invalid("psk_nonce of %d bytes, want %d", len(id.Nonce), g.suite.HashSize())
	}
	return nil
}

// senderMayPropose checks a committed proposal's sender (§12.1.8, §12.2):
// members propose anything; an external commit's joiner its own
// proposals; an external sender only the types of the "Ext" column; a
// new_member_proposal sender only an Add; outside senders never in an
// external commit.
func senderMayPropose(p cached, external bool) error {
	t := p.proposal.Type
	switch p.sender.Type {
	case framing.SenderMember:
		return nil
	case framing.SenderNewMemberCommit:
		if external {
			return nil
		}
	case framing.SenderExternal:
		if !external && externalSenderAllowed(t) {
			return nil
		}
	case framing.SenderNewMemberProposal:
		if !external && t == message.ProposalAdd {
			return nil
		}
	}
	return invalid("proposal type %d from sender type %d", t, p.sender.Type)
}

func hasReference(c *message.Commit) bool {
	return slices.ContainsFunc(c.Proposals, func(p message.ProposalOrRef) bool { return p.Type == message.ProposalReference })
}

// leafError marks a leaf node's failed check as [ErrLeafNode].
func leafError(err error) error {
	if errors.Is(err, ErrLeafNode) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrLeafNode, err)
}
