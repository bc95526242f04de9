package mls

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
	"github.com/regroup-mls/regroup/adapters/mls/treekem"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
	"github.com/regroup-mls/regroup/ports"
)

// DefaultPublicCacheBytes is the default bound of a [PublicGroups]
// validator's cache of decoded states, in bytes of encoded state: about
// fifty states of a 1,000-member group (COMP-312).
const DefaultPublicCacheBytes = 16 << 20

// PublicOptions configure a [PublicGroups] validator.
type PublicOptions struct {
	// Clock is the time key packages' lifetimes are checked against; nil
	// uses the system clock.
	Clock ports.Clock
	// LifetimeSkew widens every lifetime by this much on both sides, for
	// clocks that differ between committer and validator; 0 means
	// DefaultLifetimeSkew.
	LifetimeSkew time.Duration
	// CacheBytes bounds the decoded states kept between calls, by their
	// encoded size: 0 means DefaultPublicCacheBytes, a negative value
	// keeps none.
	CacheBytes int
}

// PublicGroups implements [ports.PublicGroups] over package group's
// public view: it follows groups of any cipher suite package ciphersuite
// supports, with basic credentials holding an MlsCredential, as
// regroup's engine makes them. Its methods may be called from several
// goroutines.
type PublicGroups struct {
	opts  PublicOptions
	cache *publicCache
}

var _ ports.PublicGroups = (*PublicGroups)(nil)

// NewPublicGroups returns a validator configured by opts (nil for the
// defaults).
func NewPublicGroups(opts *PublicOptions) *PublicGroups {
	o := PublicOptions{}
	if opts != nil {
		o = *opts
	}
	o.LifetimeSkew = lifetimeSkew(o.LifetimeSkew)
	return &PublicGroups{opts: o, cache: newPublicCache(o.CacheBytes)}
}

func refuse(reason string, format string, args ...any) error {
	return &ports.PublicRefusal{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// Open starts a public state from a GroupInfo carrying its ratchet tree.
func (p *PublicGroups) Open(ctx context.Context, groupInfo []byte) (ports.PublicState, error) {
	if err := ctx.Err(); err != nil {
		return ports.PublicState{}, err
	}
	m, err := framing.Decode(groupInfo)
	if err != nil || m.GroupInfo == nil {
		return ports.PublicState{}, refuse(ports.RefusedMalformed, "not a GroupInfo: %v", err)
	}
	gi := m.GroupInfo
	if m.Version != message.MLS10 || gi.GroupContext.Version != message.MLS10 {
		return ports.PublicState{}, refuse(ports.RefusedMalformed, "GroupInfo of version %d", m.Version)
	}
	if _, ok := gi.Extensions.Find(message.ExtRatchetTree); !ok {
		return ports.PublicState{}, refuse(ports.RefusedMalformed, "GroupInfo without the ratchet_tree extension")
	}
	s, err := ciphersuite.Lookup(gi.GroupContext.CipherSuite)
	if err != nil {
		return ports.PublicState{}, refuse(ports.RefusedGroupInfo, "%v", err)
	}
	g, err := group.NewPublic(s, gi, &group.PublicOptions{Validate: ratchettree.ValidateOptions{
		Credential: func(_ treemath.LeafIndex, ln *message.LeafNode) error { return checkCredential(ln) }}})
	if err != nil {
		return ports.PublicState{}, openRefusal(err)
	}
	b, err := g.MarshalPublic()
	if err != nil {
		return ports.PublicState{}, err
	}
	p.cache.put(b, g)
	return ports.PublicState{State: b, View: publicView(g)}, nil
}

// openRefusal classifies a failure of group.NewPublic.
func openRefusal(err error) error {
	reason := ports.RefusedGroupInfo
	switch {
	case errors.Is(err, group.ErrTree):
		reason = ports.RefusedTreeHash
	case errors.Is(err, group.ErrSignature):
		reason = ports.RefusedSignature
	}
	return &ports.PublicRefusal{Reason: reason, Err: err}
}

// Apply validates a PublicMessage commit against state and computes the
// next state.
func (p *PublicGroups) Apply(ctx context.Context, state []byte, commit []byte) (ports.PublicCommit, error) {
	if err := ctx.Err(); err != nil {
		return ports.PublicCommit{}, err
	}
	m, err := framing.Decode(commit)
	if err != nil {
		return ports.PublicCommit{}, refuse(ports.RefusedMalformed, "not an MLSMessage: %v", err)
	}
	if m.Version != message.MLS10 {
		return ports.PublicCommit{}, refuse(ports.RefusedMalformed, "message of version %d", m.Version)
	}
	if m.WireFormat != framing.WirePublicMessage || m.Public == nil {
		return ports.PublicCommit{}, refuse(ports.RefusedSender, "wire format %d: the validator reads PublicMessage commits only", m.WireFormat)
	}
	e, err := p.load(state)
	if err != nil {
		return ports.PublicCommit{}, err
	}
	c := &m.Public.Content
	if c.ContentType != framing.ContentCommit || c.Commit == nil {
		return ports.PublicCommit{}, refuse(ports.RefusedSender, "content type %d: the validator reads commits only", c.ContentType)
	}
	e.mu.Lock()
	pending, err := e.g.StageCommit(m)
	e.mu.Unlock()
	if err != nil {
		return ports.PublicCommit{}, applyRefusal(err)
	}
	next, err := pending.Public()
	if err != nil {
		return ports.PublicCommit{}, err
	}
	for i, cp := range pending.Proposals {
		if t := cp.Proposal.Type; t == message.ProposalReInit || t == message.ProposalPreSharedKey {
			return ports.PublicCommit{}, refuse(ports.RefusedProposal, "proposal %d: type %d, which regroup's groups do not use (COMP-310)", i, t)
		}
	}
	if err := p.checkNewLeaves(c.Commit, pending.Proposals); err != nil {
		return ports.PublicCommit{}, &ports.PublicRefusal{Reason: ports.RefusedLeafNode, Err: err}
	}
	b, err := next.MarshalPublic()
	if err != nil {
		return ports.PublicCommit{}, err
	}
	p.cache.put(b, next)
	out := ports.PublicCommit{Epoch: c.Epoch, SenderType: ports.SenderType(c.Sender.Type),
		Next: ports.PublicState{State: b, View: publicView(next)}}
	if c.Sender.Type == framing.SenderMember {
		out.Sender = toMember(c.Sender.LeafIndex, e.g.LeafNode(treemath.LeafIndex(c.Sender.LeafIndex)))
	} else {
		out.Sender = joinerOf(&out.Next.View, c.Commit)
	}
	out.Proposals = proposals(e.g, &out.Next.View, pending.Proposals)
	return out, nil
}

// applyRefusal classifies a failure of StageCommit on a public view.
func applyRefusal(err error) error {
	var ee *group.EpochError
	reason := ports.RefusedProposal
	switch {
	case errors.As(err, &ee):
		reason = ports.RefusedEpoch
		rel := ports.EpochOlder
		if ee.MessageEpoch > ee.GroupEpoch {
			rel = ports.EpochFuture
		}
		err = fmt.Errorf("%w: %w", &ports.WrongEpochError{Relation: rel, MessageEpoch: ee.MessageEpoch, GroupEpoch: ee.GroupEpoch}, err)
	case errors.Is(err, group.ErrWrongGroup):
		reason = ports.RefusedGroup
	case errors.Is(err, group.ErrSignature):
		reason = ports.RefusedSignature
	case errors.Is(err, group.ErrSender):
		reason = ports.RefusedSender
	case errors.Is(err, group.ErrLeafNode):
		reason = ports.RefusedLeafNode
	case errors.Is(err, treekem.ErrParentHash), errors.Is(err, treekem.ErrPathMismatch):
		reason = ports.RefusedParentHash
	case errors.Is(err, group.ErrTree):
		reason = ports.RefusedTreeHash
	}
	return &ports.PublicRefusal{Reason: reason, Err: err}
}

// checkNewLeaves applies what package group leaves to its caller to the
// leaves a commit brings: each carries a basic credential naming an inbox
// (JOIN-004), and an added key package is within its lifetime, widened by
// the skew (RFC 9420 §7.3).
func (p *PublicGroups) checkNewLeaves(c *message.Commit, props []group.CommitProposal) error {
	now := time.Now()
	if p.opts.Clock != nil {
		now = p.opts.Clock.Now()
	}
	if err := checkAddedLifetimes(props, now, p.opts.LifetimeSkew); err != nil {
		return err
	}
	for i, cp := range props {
		switch pr := cp.Proposal; {
		case pr.Type == message.ProposalAdd && pr.Add != nil:
			ln := &pr.Add.KeyPackage.LeafNode
			if err := checkCredential(ln); err != nil {
				return fmt.Errorf("proposal %d: added leaf: %w", i, err)
			}
		case pr.Type == message.ProposalUpdate && pr.Update != nil:
			if err := checkCredential(&pr.Update.LeafNode); err != nil {
				return fmt.Errorf("proposal %d: updated leaf: %w", i, err)
			}
		}
	}
	if c.Path != nil {
		if err := checkCredential(&c.Path.LeafNode); err != nil {
			return fmt.Errorf("path leaf: %w", err)
		}
	}
	return nil
}

// checkCredential requires a basic credential holding an MlsCredential
// with an inbox id.
func checkCredential(ln *message.LeafNode) error {
	if ln.Credential.Type != message.CredentialBasic {
		return fmt.Errorf("credential type %d, not basic (JOIN-004)", ln.Credential.Type)
	}
	if inboxID(&ln.Credential) == "" {
		return errors.New("credential names no inbox")
	}
	return nil
}

// CheckGroupInfo verifies that groupInfo describes state's epoch.
func (p *PublicGroups) CheckGroupInfo(ctx context.Context, state []byte, groupInfo []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m, err := framing.Decode(groupInfo)
	if err != nil || m.GroupInfo == nil {
		return refuse(ports.RefusedMalformed, "not a GroupInfo: %v", err)
	}
	if m.Version != message.MLS10 {
		return refuse(ports.RefusedMalformed, "GroupInfo of version %d", m.Version)
	}
	e, err := p.load(state)
	if err != nil {
		return err
	}
	gi, g := m.GroupInfo, e.g
	gc := g.GroupContext()
	if !bytes.Equal(gi.GroupContext.GroupID, gc.GroupID) {
		return refuse(ports.RefusedGroup, "GroupInfo of group %x, state of %x", gi.GroupContext.GroupID, gc.GroupID)
	}
	if gi.GroupContext.Epoch != gc.Epoch {
		rel := ports.EpochOlder
		if gi.GroupContext.Epoch > gc.Epoch {
			rel = ports.EpochFuture
		}
		return &ports.PublicRefusal{Reason: ports.RefusedGroupInfo, Err: fmt.Errorf("GroupInfo of another epoch: %w",
			&ports.WrongEpochError{Relation: rel, MessageEpoch: gi.GroupContext.Epoch, GroupEpoch: gc.Epoch})}
	}
	want, err := codec.Marshal(&gc)
	if err != nil {
		return err
	}
	got, err := codec.Marshal(&gi.GroupContext)
	if err != nil || !bytes.Equal(got, want) {
		return refuse(ports.RefusedGroupInfo, "GroupInfo's group context differs from the state's")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	signer := g.LeafNode(treemath.LeafIndex(gi.Signer))
	if signer == nil {
		return refuse(ports.RefusedGroupInfo, "GroupInfo signer %d is not a member", gi.Signer)
	}
	if err := gi.Verify(g.Suite(), signer.SignatureKey); err != nil {
		return &ports.PublicRefusal{Reason: ports.RefusedSignature, Err: err}
	}
	if !bytes.Equal(gi.ConfirmationTag, g.ConfirmationTag()) {
		return refuse(ports.RefusedGroupInfo, "GroupInfo's confirmation tag is not the epoch's")
	}
	if data, ok := gi.Extensions.Find(message.ExtRatchetTree); ok {
		tree, err := codec.Marshal(g.Tree().Export())
		if err != nil {
			return err
		}
		if !bytes.Equal(data, tree) {
			return refuse(ports.RefusedTreeHash, "GroupInfo's ratchet tree is not the state's")
		}
	}
	return nil
}

// load returns the decoded state, from the cache or decoded now.
func (p *PublicGroups) load(state []byte) (*publicEntry, error) {
	if e := p.cache.get(state); e != nil {
		return e, nil
	}
	g, err := group.LoadPublic(state)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ports.ErrPublicState, err)
	}
	return p.cache.put(state, g), nil
}

// publicView describes a public view for the port.
func publicView(g *group.Group) ports.GroupView {
	gc := g.GroupContext()
	return ports.GroupView{GroupID: gc.GroupID, Epoch: gc.Epoch, TreeHash: gc.TreeHash, Extensions: fromExtensions(gc.Extensions),
		OwnLeaf: ports.NoLeaf, Members: membersOf(g.Members(), g.LeafNode)}
}

var _ ports.PublicStateViewer = (*PublicGroups)(nil)

// View returns the view of a state [PublicGroups.Open] or
// [PublicGroups.Apply] returned, as [ports.PublicState.View] reported it;
// bytes it cannot read fail with an error wrapping [ports.ErrPublicState].
func (p *PublicGroups) View(ctx context.Context, state []byte) (ports.GroupView, error) {
	if err := ctx.Err(); err != nil {
		return ports.GroupView{}, err
	}
	e, err := p.load(state)
	if err != nil {
		return ports.GroupView{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return publicView(e.g), nil
}
