package group

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
	"github.com/regroup-mls/regroup/adapters/mls/secrettree"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// view is what unprotecting a message of one epoch needs.
type view struct {
	epoch   uint64
	gcBytes []byte
	// tree is the current epoch's tree; a past epoch keeps only its
	// members' leaves, which is all a late message needs.
	tree       *ratchettree.Tree
	leaves     []pastLeaf
	secrets    *secrettree.Tree
	senderData []byte
	membership []byte
}

// pastLeaf is a non-blank leaf of a past epoch's tree.
type pastLeaf struct {
	index treemath.LeafIndex
	leaf  *message.LeafNode
}

// leaf returns the leaf at l in the view's epoch, nil when blank.
func (v *view) leaf(l treemath.LeafIndex) *message.LeafNode {
	if v.tree != nil {
		return v.tree.Leaf(l)
	}
	i, ok := slices.BinarySearchFunc(v.leaves, l, func(p pastLeaf, l treemath.LeafIndex) int { return cmp.Compare(p.index, l) })
	if !ok {
		return nil
	}
	return v.leaves[i].leaf
}

// pastView returns the current epoch's view as a past epoch keeps it.
func (g *Group) pastView() view {
	v := *g.current()
	v.tree = nil
	for _, l := range g.tree.Members() {
		v.leaves = append(v.leaves, pastLeaf{index: l, leaf: g.tree.Leaf(l)})
	}
	return v
}

func (g *Group) current() *view {
	v := &view{epoch: g.gc.Epoch, gcBytes: g.gcBytes, tree: g.tree, secrets: g.secrets}
	if g.epoch != nil {
		v.senderData, v.membership = g.epoch.SenderDataSecret, g.epoch.MembershipKey
	}
	return v
}

// viewFor returns the keys of the message's epoch: the current one, or a
// retained past one when allowPast is set.
func (g *Group) viewFor(epoch uint64, allowPast bool) (*view, error) {
	if epoch == g.gc.Epoch {
		return g.current(), nil
	}
	if allowPast {
		for i := range g.past {
			if g.past[i].epoch == epoch {
				return &g.past[i], nil
			}
		}
	}
	return nil, &EpochError{MessageEpoch: epoch, GroupEpoch: g.gc.Epoch}
}

// memberLeaf returns the leaf of a member sender in the tree of epoch (the
// current one or a retained past one), or nil.
func (g *Group) memberLeaf(epoch uint64, s framing.Sender) *message.LeafNode {
	if s.Type != framing.SenderMember {
		return nil
	}
	v, err := g.viewFor(epoch, true)
	if err != nil {
		return nil
	}
	return v.leaf(treemath.LeafIndex(s.LeafIndex))
}

// open unprotects m and verifies its signature with the sender's leaf key
// (§6.2, §6.3). Members send anything; outside senders send only
// PublicMessages of the current epoch: external commits, and proposals of
// external and new_member_proposal senders (§12.1.8). allowPast admits
// members' messages of retained past epochs.
func (g *Group) open(m *framing.MLSMessage, allowPast bool) (*framing.AuthenticatedContent, error) {
	if m == nil {
		return nil, invalid("no message")
	}
	if m.Version != message.MLS10 {
		// §6: mls10 is the only version; a message of any other is not one
		// this group's members can have sent under its rules.
		return nil, invalid("protocol version %d is not mls10", m.Version)
	}
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
	v, err := g.viewFor(epoch, allowPast)
	if err != nil {
		return nil, err
	}
	var ac *framing.AuthenticatedContent
	if m.Public != nil {
		switch st := m.Public.Content.Sender.Type; {
		case st == framing.SenderMember:
		case st == framing.SenderNewMemberCommit && epoch == g.gc.Epoch:
			return g.openExternalCommit(m.Public, v)
		case (st == framing.SenderExternal || st == framing.SenderNewMemberProposal) && epoch == g.gc.Epoch:
			return g.openExternalProposal(m.Public, v)
		default:
			return nil, fmt.Errorf("%w: %w: sender type %d", ErrUnsupported, ErrSender, st)
		}
		if g.Public() { // no membership key: the signature is all a public view checks
			if m.Public.Content.ContentType == framing.ContentApplication {
				return nil, invalid("application data as PublicMessage")
			}
			ac = m.Public.AuthenticatedContent()
		} else {
			ac, err = m.Public.Unprotect(g.suite, v.membership, v.gcBytes)
		}
	} else if g.Public() {
		return nil, fmt.Errorf("%w: a public view holds no keys", ErrUndecryptable)
	} else {
		ac, err = framing.Decrypt(g.suite, m.Private, v.secrets, v.senderData)
	}
	if errors.Is(err, framing.ErrDecrypt) {
		return nil, fmt.Errorf("%w: %w", ErrUndecryptable, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	leaf := v.leaf(treemath.LeafIndex(ac.Content.Sender.LeafIndex))
	if leaf == nil {
		return nil, invalidAs(ErrSender, "sender leaf %d is blank", ac.Content.Sender.LeafIndex)
	}
	if err := ac.Verify(g.suite, leaf.SignatureKey, v.gcBytes); err != nil {
		return nil, wrapAs(ErrSignature, err)
	}
	return ac, nil
}

// HandleProposal verifies a proposal message of the current epoch and
// caches it, so that a later commit can include it by reference (§12.4).
func (g *Group) HandleProposal(m *framing.MLSMessage) error {
	ac, err := g.open(m, false)
	if err != nil {
		return err
	}
	return g.cacheProposal(ac)
}

func (g *Group) cacheProposal(ac *framing.AuthenticatedContent) error {
	if ac.Content.ContentType != framing.ContentProposal || ac.Content.Proposal == nil {
		return invalid("content type %d is not a proposal", ac.Content.ContentType)
	}
	if err := checkSelfRemoveReceived(ac); err != nil {
		return err
	}
	ref, err := ac.ProposalRef(g.suite)
	if err != nil {
		return err
	}
	g.proposals = append(g.proposals, cached{ref: ref, proposal: ac.Content.Proposal, sender: ac.Content.Sender})
	return nil
}

// Unprotect opens an application message of the current epoch, or of a
// retained past one (see [Group.SetPastEpochs]), and returns its data and
// sender leaf.
func (g *Group) Unprotect(m *framing.MLSMessage) ([]byte, treemath.LeafIndex, error) {
	ac, err := g.open(m, true)
	if err != nil {
		return nil, 0, err
	}
	if ac.Content.ContentType != framing.ContentApplication {
		return nil, 0, invalid("content type %d is not application data", ac.Content.ContentType)
	}
	return ac.Content.Application, treemath.LeafIndex(ac.Content.Sender.LeafIndex), nil
}

// Received is what [Group.Process] learned from one message.
type Received struct {
	// Epoch is the epoch the message names.
	Epoch             uint64
	ContentType       framing.ContentType
	Sender            framing.Sender
	AuthenticatedData []byte
	// Application is the data of an application message.
	Application []byte
	// Proposal is a proposal now cached for this epoch.
	Proposal *message.Proposal
	// Pending is a staged commit, to merge with [Group.MergePending].
	Pending *Pending
	// SenderLeaf is a member sender's leaf in the tree of the message's
	// epoch: for a late message of a retained past epoch, the leaf as it
	// was then, which may since have been removed or given to another
	// member. Nil for other senders.
	SenderLeaf *message.LeafNode
}

// Process handles one message by its content type: it opens application
// data (also of retained past epochs), caches a proposal, or stages a
// commit without merging it.
func (g *Group) Process(m *framing.MLSMessage) (*Received, error) {
	var ct framing.ContentType
	switch {
	case m == nil:
		return nil, invalid("no message")
	case m.Public != nil:
		ct = m.Public.Content.ContentType
	case m.Private != nil:
		ct = m.Private.ContentType
	default:
		return nil, invalid("wire format %d is not a group message", m.WireFormat)
	}
	if ct == framing.ContentCommit {
		p, err := g.StageCommit(m)
		if err != nil {
			return nil, err
		}
		return &Received{Epoch: g.gc.Epoch, ContentType: ct, Sender: p.Sender, AuthenticatedData: p.AuthenticatedData, Pending: p,
			SenderLeaf: g.memberLeaf(g.gc.Epoch, p.Sender)}, nil
	}
	ac, err := g.open(m, ct == framing.ContentApplication)
	if err != nil {
		return nil, err
	}
	r := &Received{Epoch: ac.Content.Epoch, ContentType: ac.Content.ContentType, Sender: ac.Content.Sender, AuthenticatedData: ac.Content.AuthenticatedData,
		SenderLeaf: g.memberLeaf(ac.Content.Epoch, ac.Content.Sender)}
	switch ac.Content.ContentType {
	case framing.ContentApplication:
		r.Application = ac.Content.Application
	case framing.ContentProposal:
		if err := g.cacheProposal(ac); err != nil {
			return nil, err
		}
		r.Proposal = ac.Content.Proposal
	default:
		return nil, invalid("content type %d", ac.Content.ContentType)
	}
	return r, nil
}

// openExternalCommit verifies an external commit (§12.4.3.2): it carries no
// membership tag and is signed with the key of the joiner's new leaf.
func (g *Group) openExternalCommit(pm *framing.PublicMessage, v *view) (*framing.AuthenticatedContent, error) {
	ac := pm.AuthenticatedContent()
	c := ac.Content.Commit
	if ac.Content.ContentType != framing.ContentCommit || c == nil || c.Path == nil {
		return nil, invalidAs(ErrSender, "new_member_commit sender without a commit and path")
	}
	if err := ac.Verify(g.suite, c.Path.LeafNode.SignatureKey, v.gcBytes); err != nil {
		return nil, wrapAs(ErrSignature, err)
	}
	return ac, nil
}
