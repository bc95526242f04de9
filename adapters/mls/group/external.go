package group

import (
	"crypto/rand"
	"fmt"
	"maps"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/keyschedule"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
	"github.com/regroup-mls/regroup/adapters/mls/treekem"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// ExternalJoinOptions describe an external commit (§12.4.3.2).
type ExternalJoinOptions struct {
	// GroupInfo is the group's signed GroupInfo, with external_pub.
	GroupInfo *message.GroupInfo
	// Tree is used when the GroupInfo has no ratchet_tree extension.
	Tree message.RatchetTree
	// Leaf is the template of the joiner's leaf (signature key, credential,
	// capabilities, extensions); its encryption key and source are set here.
	Leaf          *message.LeafNode
	SignaturePriv []byte
	PSKs          PSKStore
	// Resync, when set, removes the joiner's previous leaf in the same
	// commit; it must carry the same credential as Leaf.
	Resync *treemath.LeafIndex
	// Validate tunes the checks of the received tree.
	Validate ratchettree.ValidateOptions
	// PreSharedKeys are injected by PreSharedKey proposals of the commit
	// (§12.4.3.2 allows them beside ExternalInit); their nonces are drawn
	// here. External PSKs come from PSKs, resumption PSKs (usage
	// application, this group's id) from Resumption.
	PreSharedKeys []message.PreSharedKeyID
	// Resumption holds resumption_psk secrets of past epochs of the group
	// the joiner kept, by epoch: a former member rejoining by resync.
	Resumption map[uint64][]byte
	// SelfRemoves are pending SelfRemove proposals of the GroupInfo's
	// epoch (PublicMessages, as a delivery service hands them out with the
	// GroupInfo); the draft SelfRemove has the joiner of a
	// self-remove-capable group include them by reference (COMP-304).
	// Each is verified, except for its membership tag.
	SelfRemoves []*framing.MLSMessage
}

// JoinExternal joins a group by external commit (§12.4.3.2): it verifies
// the GroupInfo and its tree, exports the init secret to external_pub,
// takes the leftmost blank leaf with a fresh path and returns the group at
// the new epoch with the commit to send. The joiner should use the group
// only once the delivery service accepted the commit.
func JoinExternal(s *ciphersuite.Suite, opts *ExternalJoinOptions) (*Group, *framing.MLSMessage, error) {
	if opts == nil {
		return nil, nil, invalid("options are required")
	}
	gi := opts.GroupInfo
	if gi == nil || opts.Leaf == nil {
		return nil, nil, invalid("group info and leaf are required")
	}
	tree, err := joinTree(s, gi, opts.Tree, opts.Validate)
	if err != nil {
		return nil, nil, err
	}
	signer, err := groupInfoSigner(tree, gi)
	if err != nil {
		return nil, nil, err
	}
	if err := gi.Verify(s, signer.SignatureKey); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	data, ok := gi.Extensions.Find(message.ExtExternalPub)
	if !ok {
		return nil, nil, invalid("group info without external_pub")
	}
	var ep message.ExternalPub
	if err := codec.Unmarshal(data, &ep); err != nil {
		return nil, nil, fmt.Errorf("%w: external_pub: %w", ErrInvalid, err)
	}
	kem, initSecret, err := keyschedule.ExternalInitSecret(s, ep.PublicKey)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: external_pub: %w", ErrInvalid, err)
	}
	interim, err := keyschedule.InterimTranscriptHash(s, gi.GroupContext.ConfirmedTranscriptHash, gi.ConfirmationTag)
	if err != nil {
		return nil, nil, err
	}
	gcBytes, err := codec.Marshal(&gi.GroupContext)
	if err != nil {
		return nil, nil, err
	}
	// g stands for the group's current epoch as far as an outsider knows it.
	g := &Group{suite: s, gc: gi.GroupContext, gcBytes: gcBytes, tree: tree, interim: interim,
		sigPriv: opts.SignaturePriv, psks: opts.PSKs, resume: maps.Clone(opts.Resumption)}
	if g.resume == nil {
		g.resume = map[uint64][]byte{}
	}
	self := framing.Sender{Type: framing.SenderNewMemberCommit}
	props := []*message.Proposal{{Type: message.ProposalExternalInit, ExternalInit: &message.ExternalInit{KEMOutput: kem}}}
	if opts.Resync != nil {
		old := tree.Leaf(*opts.Resync)
		if old == nil || old.Credential.Type != opts.Leaf.Credential.Type || string(old.Credential.Identity) != string(opts.Leaf.Credential.Identity) {
			return nil, nil, invalid("resync of leaf %d with another credential", *opts.Resync)
		}
		props = append(props, &message.Proposal{Type: message.ProposalRemove, Remove: &message.Remove{Removed: uint32(*opts.Resync)}})
	}
	for _, id := range opts.PreSharedKeys {
		id.Nonce = make([]byte, s.HashSize())
		if _, err := rand.Read(id.Nonce); err != nil {
			return nil, nil, fmt.Errorf("psk nonce: %w", err)
		}
		props = append(props, &message.Proposal{Type: message.ProposalPreSharedKey, PreSharedKey: &message.PreSharedKey{PSK: id}})
	}
	commit := &message.Commit{}
	cs := make([]cached, len(props))
	for i, p := range props {
		cs[i] = cached{proposal: p, sender: self}
		commit.Proposals = append(commit.Proposals, message.ProposalOrRef{Type: message.ProposalInline, Proposal: p})
	}
	for _, m := range opts.SelfRemoves {
		c, err := g.pendingSelfRemove(m)
		if err != nil {
			return nil, nil, err
		}
		g.proposals = append(g.proposals, c)
		cs = append(cs, c)
		commit.Proposals = append(commit.Proposals, message.ProposalOrRef{Type: message.ProposalReference, Reference: c.ref})
	}
	next := tree.Clone()
	ap, err := g.apply(next, noLeaf, cs, true)
	if err != nil {
		return nil, nil, err
	}
	leaf := *opts.Leaf
	me, err := next.AddLeaf(&leaf)
	if err != nil {
		return nil, nil, err
	}
	gc := g.gc
	gc.Epoch++
	gc.Extensions = ap.extensions
	priv := treekem.NewPrivateState(s, me, nil)
	created, err := priv.CreatePath(next, &leaf, opts.SignaturePriv, gc.GroupID, nil, func(th []byte) ([]byte, error) {
		gc.TreeHash = th
		return codec.Marshal(&gc)
	})
	if err != nil {
		return nil, nil, err
	}
	commit.Path = created.Path
	content := &framing.FramedContent{GroupID: gc.GroupID, Epoch: g.gc.Epoch, Sender: self,
		AuthenticatedData: []byte{}, ContentType: framing.ContentCommit, Commit: commit}
	ac, err := framing.Sign(s, framing.WirePublicMessage, content, opts.SignaturePriv, gcBytes)
	if err != nil {
		return nil, nil, err
	}
	joined, err := g.nextEpoch(ac, gc, next, priv, created.CommitSecret, ap.psks, initSecret, false)
	if err != nil {
		return nil, nil, err
	}
	pm, err := framing.NewPublicMessage(s, ac, nil, gcBytes)
	if err != nil {
		return nil, nil, err
	}
	return joined, &framing.MLSMessage{Version: message.MLS10, WireFormat: framing.WirePublicMessage, Public: pm}, nil
}

// JoinExternalPending is [JoinExternal] with its result as a Pending: the
// commit to send, its proposals, and the joined group for
// [Pending.Joined] once the delivery service accepted the commit.
func JoinExternalPending(s *ciphersuite.Suite, opts *ExternalJoinOptions) (*Pending, error) {
	joined, m, err := JoinExternal(s, opts)
	if err != nil {
		return nil, err
	}
	c := m.Public.Content
	p := &Pending{Message: m, next: joined, Sender: c.Sender, AuthenticatedData: c.AuthenticatedData}
	for _, pr := range c.Commit.Proposals {
		if pr.Type == message.ProposalInline {
			p.Proposals = append(p.Proposals, CommitProposal{Proposal: pr.Proposal, Sender: c.Sender})
		}
	}
	for _, sr := range opts.SelfRemoves { // verified by JoinExternal, in its order
		p.Proposals = append(p.Proposals, CommitProposal{Proposal: sr.Public.Content.Proposal, Sender: sr.Public.Content.Sender, ByReference: true})
	}
	return p, nil
}

// pendingSelfRemove verifies a SelfRemove proposal of the current epoch
// handed to an external joiner: a PublicMessage from a member, signed
// with that member's leaf key; an outsider cannot check its membership
// tag.
func (g *Group) pendingSelfRemove(m *framing.MLSMessage) (cached, error) {
	if m == nil || m.Public == nil {
		return cached{}, invalid("pending SelfRemove is not a PublicMessage")
	}
	ac := m.Public.AuthenticatedContent()
	c := &ac.Content
	if c.ContentType != framing.ContentProposal || c.Proposal == nil || c.Proposal.Type != message.ProposalSelfRemove {
		return cached{}, invalid("pending proposal is not a SelfRemove")
	}
	if err := checkSelfRemoveReceived(ac); err != nil {
		return cached{}, err
	}
	if string(c.GroupID) != string(g.gc.GroupID) || c.Epoch != g.gc.Epoch {
		return cached{}, invalid("pending SelfRemove of group %x epoch %d", c.GroupID, c.Epoch)
	}
	leaf := g.tree.Leaf(treemath.LeafIndex(c.Sender.LeafIndex))
	if leaf == nil {
		return cached{}, invalid("pending SelfRemove from blank leaf %d", c.Sender.LeafIndex)
	}
	if err := ac.Verify(g.suite, leaf.SignatureKey, g.gcBytes); err != nil {
		return cached{}, fmt.Errorf("%w: pending SelfRemove: %w", ErrInvalid, err)
	}
	ref, err := ac.ProposalRef(g.suite)
	if err != nil {
		return cached{}, err
	}
	return cached{ref: ref, proposal: c.Proposal, sender: c.Sender}, nil
}
