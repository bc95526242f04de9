package group

import (
	"fmt"

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
		sigPriv: opts.SignaturePriv, psks: opts.PSKs, resume: map[uint64][]byte{}}
	self := framing.Sender{Type: framing.SenderNewMemberCommit}
	props := []*message.Proposal{{Type: message.ProposalExternalInit, ExternalInit: &message.ExternalInit{KEMOutput: kem}}}
	if opts.Resync != nil {
		old := tree.Leaf(*opts.Resync)
		if old == nil || old.Credential.Type != opts.Leaf.Credential.Type || string(old.Credential.Identity) != string(opts.Leaf.Credential.Identity) {
			return nil, nil, invalid("resync of leaf %d with another credential", *opts.Resync)
		}
		props = append(props, &message.Proposal{Type: message.ProposalRemove, Remove: &message.Remove{Removed: uint32(*opts.Resync)}})
	}
	commit := &message.Commit{}
	cs := make([]cached, len(props))
	for i, p := range props {
		cs[i] = cached{proposal: p, sender: self}
		commit.Proposals = append(commit.Proposals, message.ProposalOrRef{Type: message.ProposalInline, Proposal: p})
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
		p.Proposals = append(p.Proposals, CommitProposal{Proposal: pr.Proposal, Sender: c.Sender})
	}
	return p, nil
}
