package group

import (
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/keyschedule"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
	"github.com/regroup-mls/regroup/adapters/mls/treekem"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
	"github.com/regroup-mls/regroup/adapters/mls/welcome"
)

// CommitOptions says what a commit carries.
type CommitOptions struct {
	// Proposals are sent inline, after the cached proposals of the epoch,
	// which are included by reference, except those §12.2 would make
	// invalid: this member's own Updates (its path replaces them), Updates
	// of leaves being removed, and repeated Removes.
	Proposals []*message.Proposal
	// Path forces an UpdatePath even where none is required.
	Path bool
	// WireFormat is WirePublicMessage (the default) or WirePrivateMessage.
	WireFormat framing.WireFormat
	// TreeInWelcome puts the ratchet_tree extension in the Welcome's GroupInfo.
	TreeInWelcome bool
	// KeepByReference, when set, decides which cached proposals the
	// commit includes by reference among those §12.2 allows.
	KeepByReference func(p *message.Proposal, sender framing.Sender) bool
}

// Pending is a commit, created by this member or staged from another, that
// has not been merged yet.
type Pending struct {
	// Message is the commit to send.
	Message *framing.MLSMessage
	// Welcome is set when the commit adds members.
	Welcome *message.Welcome
	// RemovesSelf reports a staged commit that removes this member.
	RemovesSelf bool
	// Sender and AuthenticatedData are the commit's framing.
	Sender            framing.Sender
	AuthenticatedData []byte
	// Proposals are the commit's resolved proposals, in its order; nil
	// for a pending commit restored by [LoadPending] (see
	// [Group.PendingProposals]).
	Proposals []CommitProposal

	next *Group
}

// Commit creates a commit of the current epoch (§12.4.1) without changing
// the group; [Group.MergePending] applies it once the delivery service
// accepted it.
func (g *Group) Commit(opts *CommitOptions) (*Pending, error) {
	if g.Public() {
		return nil, errPublic
	}
	if err := g.ended(); err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &CommitOptions{}
	}
	me := g.priv.Leaf()
	self := framing.Sender{Type: framing.SenderMember, LeafIndex: uint32(me)}
	commit := &message.Commit{Proposals: []message.ProposalOrRef{}}
	var props []cached
	for _, p := range g.byReference(opts.Proposals) {
		if opts.KeepByReference != nil && !opts.KeepByReference(p.proposal, p.sender) {
			continue
		}
		props = append(props, p)
		commit.Proposals = append(commit.Proposals, message.ProposalOrRef{Type: message.ProposalReference, Reference: p.ref})
	}
	for _, p := range opts.Proposals {
		props = append(props, cached{proposal: p, sender: self})
		commit.Proposals = append(commit.Proposals, message.ProposalOrRef{Type: message.ProposalInline, Proposal: p})
	}
	tree := g.tree.Clone()
	ap, err := g.apply(tree, me, props, false)
	if err != nil {
		return nil, err
	}
	gc := g.gc
	gc.Epoch++
	gc.Extensions = ap.extensions
	priv := g.priv.Clone()
	commitSecret := make([]byte, g.suite.HashSize())
	var created *treekem.CreatedPath
	if ap.needPath || opts.Path {
		leaf := *tree.Leaf(me)
		created, err = priv.CreatePath(tree, &leaf, g.sigPriv, g.gc.GroupID, ap.added, func(th []byte) ([]byte, error) {
			gc.TreeHash = th
			return codec.Marshal(&gc)
		})
		if err != nil {
			return nil, fmt.Errorf("commit: %w", err)
		}
		commit.Path, commitSecret = created.Path, created.CommitSecret
	} else if gc.TreeHash, err = tree.TreeHash(); err != nil {
		return nil, err
	}
	wf := opts.WireFormat
	if wf == 0 {
		wf = framing.WirePublicMessage
	}
	c := g.content(framing.ContentCommit)
	c.Commit = commit
	ac, err := framing.Sign(g.suite, wf, c, g.sigPriv, g.gcBytes)
	if err != nil {
		return nil, err
	}
	next, err := g.nextEpoch(ac, gc, tree, priv, commitSecret, ap.psks, g.epoch.InitSecret, false)
	if err != nil {
		return nil, err
	}
	next.reinit = ap.reinit
	msg, err := g.protect(ac)
	if err != nil {
		return nil, err
	}
	p := &Pending{Message: msg, next: next, Sender: c.Sender, AuthenticatedData: c.AuthenticatedData, Proposals: commitProposals(props)}
	if len(ap.added) > 0 {
		if p.Welcome, err = next.welcome(tree, ap, created, opts.TreeInWelcome); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// nextEpoch runs the transcript hashes and key schedule for the signed
// commit ac and returns the group of the new epoch. For a received commit
// it verifies the confirmation tag; for one of ours it sets it.
func (g *Group) nextEpoch(ac *framing.AuthenticatedContent, gc message.GroupContext, tree *ratchettree.Tree,
	priv *treekem.PrivateState, commitSecret []byte, psks []message.PreSharedKeyID, initSecret []byte, received bool) (*Group, error) {
	cin, err := ac.ConfirmedTranscriptHashInput()
	if err != nil {
		return nil, err
	}
	gc.ConfirmedTranscriptHash = keyschedule.ConfirmedTranscriptHash(g.suite, g.interim, cin)
	pskSecret, err := g.pskSecret(psks)
	if err != nil {
		return nil, err
	}
	gcBytes, err := codec.Marshal(&gc)
	if err != nil {
		return nil, err
	}
	epoch, err := keyschedule.Derive(g.suite, initSecret, commitSecret, pskSecret, gcBytes)
	if err != nil {
		return nil, err
	}
	if received {
		if !keyschedule.VerifyConfirmationTag(g.suite, epoch.ConfirmationKey, gc.ConfirmedTranscriptHash, ac.Auth.ConfirmationTag) {
			return nil, invalid("confirmation tag does not match")
		}
	} else {
		ac.Auth.ConfirmationTag = keyschedule.ConfirmationTag(g.suite, epoch.ConfirmationKey, gc.ConfirmedTranscriptHash)
	}
	interim, err := keyschedule.InterimTranscriptHash(g.suite, gc.ConfirmedTranscriptHash, ac.Auth.ConfirmationTag)
	if err != nil {
		return nil, err
	}
	next := &Group{suite: g.suite, sigPriv: g.sigPriv, psks: g.psks, confirmationTag: ac.Auth.ConfirmationTag, resume: map[uint64][]byte{}}
	for e, r := range g.resume {
		next.resume[e] = r
	}
	next.pskList = psks
	if err := next.install(gc, tree, priv, epoch, interim); err != nil {
		return nil, err
	}
	return next, nil
}

// welcome builds the Welcome for the members a commit added (§12.4.3.1).
func (g *Group) welcome(tree *ratchettree.Tree, ap *applied, created *treekem.CreatedPath, withTree bool) (*message.Welcome, error) {
	gi, err := g.GroupInfo(withTree)
	if err != nil {
		return nil, err
	}
	var rs []welcome.Recipient
	for i, l := range ap.added {
		r := welcome.Recipient{KeyPackage: ap.addedKPs[i]}
		if created != nil {
			r.PathSecret = created.PathSecrets[treemath.CommonAncestor(l.Node(), g.priv.Leaf().Node())]
		}
		rs = append(rs, r)
	}
	return welcome.Seal(g.suite, gi, g.epoch.JoinerSecret, g.epoch.WelcomeSecret, g.pskList, rs)
}

// MergePending makes the epoch of a pending commit current: one this member
// created, once the delivery service accepted it, or one staged with
// [Group.StageCommit].
func (g *Group) MergePending(p *Pending) error {
	if p == nil || p.next == nil || p.next.gc.Epoch != g.gc.Epoch+1 {
		return fmt.Errorf("%w: pending commit is not for the current epoch", ErrWrongEpoch)
	}
	next := p.next
	next.maxPast = g.maxPast
	// A removed member keeps no keys: its past epochs go with it.
	if g.maxPast > 0 && !p.RemovesSelf {
		next.past = append(g.past, g.pastView())
		next.trimPast()
	}
	*g = *next
	p.next = nil
	return nil
}

// Joined returns the group of the epoch a pending external commit of
// [JoinExternalPending] leads to: the joiner's new state, which replaces
// whatever it held.
func (p *Pending) Joined() (*Group, error) {
	if p == nil || p.next == nil || p.Sender.Type != framing.SenderNewMemberCommit {
		return nil, invalid("not a pending external commit")
	}
	return p.next, nil
}

// Leaf returns this member's leaf in the epoch the commit leads to (0 when
// the commit removes it).
func (p *Pending) Leaf() treemath.LeafIndex { return p.next.Leaf() }

// Epoch returns the epoch the pending commit leads to.
func (p *Pending) Epoch() uint64 { return p.next.gc.Epoch }

// EpochAuthenticator returns the epoch_authenticator of the epoch the
// commit leads to (empty when it removes this member).
func (p *Pending) EpochAuthenticator() []byte { return p.next.EpochAuthenticator() }

// GroupContext returns the group context of the epoch the commit leads to.
func (p *Pending) GroupContext() message.GroupContext { return p.next.gc }

// Tree returns a copy of the ratchet tree of the epoch the commit leads to.
func (p *Pending) Tree() *ratchettree.Tree { return p.next.tree.Clone() }

// Members returns the indices of the non-blank leaves of the epoch the
// commit leads to, in order; [Pending.LeafNode] reads them.
func (p *Pending) Members() []treemath.LeafIndex { return p.next.tree.Members() }

// LeafNode returns the leaf at l in the epoch the commit leads to, nil
// when blank; the caller must not modify it.
func (p *Pending) LeafNode(l treemath.LeafIndex) *message.LeafNode { return p.next.tree.Leaf(l) }

// GroupInfo returns the signed GroupInfo of the epoch a commit of this
// member leads to.
func (p *Pending) GroupInfo(withTree bool) (*message.GroupInfo, error) {
	return p.next.GroupInfo(withTree)
}

// byReference picks the cached proposals a commit can include by reference
// alongside the inline ones (§12.2).
func (g *Group) byReference(inline []*message.Proposal) []cached {
	removed := map[uint32]bool{}
	for _, p := range inline {
		if p.Type == message.ProposalRemove && p.Remove != nil {
			removed[p.Remove.Removed] = true
		}
	}
	// A SelfRemove goes before any Remove of the same leaf, which it makes
	// invalid; this member's own cannot be in its commit.
	me := uint32(g.priv.Leaf())
	var out []cached
	for _, p := range g.proposals {
		if p.proposal.Type == message.ProposalSelfRemove && p.sender.Type == framing.SenderMember {
			if l := p.sender.LeafIndex; l != me && !removed[l] {
				removed[l] = true
				out = append(out, p)
			}
		}
	}
	for _, p := range g.proposals {
		if p.proposal.Type == message.ProposalSelfRemove {
			continue
		}
		if p.proposal.Type == message.ProposalRemove {
			if removed[p.proposal.Remove.Removed] {
				continue
			}
			removed[p.proposal.Remove.Removed] = true
		}
		out = append(out, p)
	}
	kept := out[:0]
	for _, p := range out {
		if p.proposal.Type == message.ProposalUpdate && (p.sender.LeafIndex == uint32(g.priv.Leaf()) || removed[p.sender.LeafIndex]) {
			continue
		}
		kept = append(kept, p)
	}
	return kept
}
