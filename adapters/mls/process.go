package mls

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/ports"
)

// Process processes one MLSMessage of the group; a commit is staged for
// MergeStaged. It first drops whatever an earlier Process staged, so that
// MergeStaged merges only the commit of the last one. It does not judge
// the lifetimes of key packages a commit adds: without the time the
// delivery service received the commit, a member catching up late would
// refuse what the service rightly accepted (COMP-316); ProcessAt does.
func (e *Engine) Process(ctx context.Context, tx ports.Tx, groupID, msg []byte) (ports.Processed, error) {
	return e.ProcessAt(ctx, tx, groupID, msg, time.Time{})
}

// ProcessAt is Process checking the lifetimes of key packages a commit
// adds at time at, the time the delivery service received the message,
// rather than at the engine's clock: a member catching up on old messages
// then judges a commit as the service did when it accepted it (COMP-316).
// A zero at checks no lifetime, as Process.
func (e *Engine) ProcessAt(ctx context.Context, tx ports.Tx, groupID, msg []byte, at time.Time) (ports.Processed, error) {
	g, err := e.load(ctx, tx, groupID)
	if err != nil {
		return ports.Processed{}, err
	}
	if err := deleteAll(ctx, tx, groupID, nsStaged, nsStagedExternal); err != nil {
		return ports.Processed{}, err
	}
	m, err := framing.Decode(msg)
	if err != nil {
		return ports.Processed{}, fmt.Errorf("%w: %v", ports.ErrInvalid, err)
	}
	epoch, hasEpoch := messageEpoch(m)
	fail := func(err error) (ports.Processed, error) {
		if hasEpoch {
			err = &ports.ProcessError{MessageEpoch: epoch, Err: err}
		}
		return ports.Processed{}, err
	}
	if !g.Active() {
		return fail(inactiveError(g, m))
	}
	out, own, err := e.processOwn(ctx, tx, g, m, msg)
	if err != nil || own {
		return out, err
	}
	r, err := g.Process(m)
	if errors.Is(err, group.ErrOwnCommit) {
		// Signed by this installation for the current epoch, yet no pending
		// commit of it is held: the group moves on without this state.
		cur := g.GroupContext().Epoch
		return fail(fmt.Errorf("%w: own commit without its pending state", &ports.WrongEpochError{Relation: ports.EpochEqual, MessageEpoch: epoch, GroupEpoch: cur}))
	}
	if err != nil {
		return fail(processError(err))
	}
	out = ports.Processed{Epoch: r.Epoch, AuthenticatedData: r.AuthenticatedData, SenderType: ports.SenderType(r.Sender.Type),
		Sender: ports.Member{LeafIndex: r.Sender.LeafIndex}}
	if l := r.SenderLeaf; l != nil { // the sender as it was in the message's epoch
		out.Sender = toMember(r.Sender.LeafIndex, l)
	}
	switch r.ContentType {
	case framing.ContentApplication:
		out.Kind, out.Application = ports.ProcessedApplication, r.Application
	case framing.ContentProposal:
		out.Kind = ports.ProcessedProposal
	case framing.ContentCommit:
		// RFC 9420 §7.3, by the rule the delivery service applies (COMP-315).
		if !at.IsZero() {
			if err := checkAddedLifetimes(r.Pending.Proposals, at, e.opts.LifetimeSkew); err != nil {
				return fail(fmt.Errorf("%w: %v", ports.ErrInvalid, err))
			}
		}
		if err := e.stage(ctx, tx, g, r.Pending, nsStaged, &out); err != nil {
			return ports.Processed{}, err
		}
		if r.Sender.Type == framing.SenderNewMemberCommit && m.Public != nil {
			out.Sender = joinerOf(out.Staged, m.Public.Content.Commit)
		}
		if m.Private == nil {
			return out, nil // staging a PublicMessage commit leaves the group as it was
		}
	}
	// The secret tree and proposal cache moved on: keep them.
	_, err = e.save(ctx, tx, g)
	return out, err
}

// stage stores a staged commit under ns and fills out's commit fields. A
// commit on the held group is stored as its changes to it; an external
// commit of this installation, built on a GroupInfo, whole.
func (e *Engine) stage(ctx context.Context, tx ports.Tx, g *group.Group, p *group.Pending, ns string, out *ports.Processed) error {
	// MergeStaged needs the new epoch, not the message.
	marshal := func() ([]byte, error) { return p.MarshalChanges(false) }
	if ns == nsStagedExternal {
		marshal = p.Marshal
	}
	b, err := marshal()
	if err != nil {
		return err
	}
	if err := tx.Blobs().Put(ctx, ns, key(g.GroupContext().GroupID), b); err != nil {
		return err
	}
	staged := pendingView(p, g)
	out.Kind, out.Staged, out.RemovesSelf = ports.ProcessedCommit, &staged, p.RemovesSelf
	out.Proposals = proposals(g, &staged, p.Proposals)
	return nil
}

// joinerOf returns the leaf an external commit's joiner takes in staged.
func joinerOf(staged *ports.GroupView, c *message.Commit) ports.Member {
	if c == nil || c.Path == nil {
		return ports.Member{}
	}
	for _, m := range staged.Members {
		if bytes.Equal(m.SignatureKey, c.Path.LeafNode.SignatureKey) {
			return m
		}
	}
	return ports.Member{}
}

// processOwn recognises this installation's pending commit, or pending
// external commit, read back: it stages the pending state for MergeStaged
// instead of processing the message, which the committer cannot do.
func (e *Engine) processOwn(ctx context.Context, tx ports.Tx, g *group.Group, m *framing.MLSMessage, msg []byte) (ports.Processed, bool, error) {
	if m.Public == nil || m.Public.Content.ContentType != framing.ContentCommit {
		return ports.Processed{}, false, nil
	}
	s := m.Public.Content.Sender
	var from, to string
	switch {
	case s.Type == framing.SenderMember && s.LeafIndex == uint32(g.Leaf()):
		from, to = nsPending, nsStaged
	case s.Type == framing.SenderNewMemberCommit:
		from, to = nsExternal, nsStagedExternal
	default:
		return ports.Processed{}, false, nil
	}
	gid := g.GroupContext().GroupID
	b, err := tx.Blobs().Get(ctx, from, key(gid))
	if errors.Is(err, ports.ErrNotFound) {
		return ports.Processed{}, false, nil
	}
	if err != nil {
		return ports.Processed{}, false, err
	}
	p, err := group.LoadPending(b, g, nil)
	if err != nil {
		return ports.Processed{}, false, fmt.Errorf("mls engine: stored commit of %x: %w", gid, err)
	}
	sent, err := codec.Marshal(p.Message)
	if err != nil || !bytes.Equal(sent, msg) {
		return ports.Processed{}, false, nil // another commit: process it as any
	}
	if p.Proposals == nil {
		if p.Proposals, err = g.PendingProposals(p); err != nil {
			return ports.Processed{}, false, fmt.Errorf("mls engine: stored commit of %x: %w", gid, err)
		}
	}
	out := ports.Processed{Epoch: m.Public.Content.Epoch, AuthenticatedData: p.AuthenticatedData, SenderType: ports.SenderType(s.Type), Own: true}
	if err := e.stage(ctx, tx, g, p, to, &out); err != nil {
		return ports.Processed{}, false, err
	}
	if to == nsStagedExternal {
		out.Sender = joinerOf(out.Staged, m.Public.Content.Commit)
	} else {
		out.Sender = toMember(s.LeafIndex, g.LeafNode(g.Leaf()))
	}
	return out, true, nil
}

// pendingView describes the epoch a pending commit leads to.
func pendingView(p *group.Pending, g *group.Group) ports.GroupView {
	gc := p.GroupContext()
	own := uint32(p.Leaf())
	if p.RemovesSelf && g != nil {
		own = uint32(g.Leaf())
	}
	v := ports.GroupView{GroupID: gc.GroupID, Epoch: gc.Epoch, EpochAuthenticator: p.EpochAuthenticator(),
		TreeHash: gc.TreeHash, Extensions: fromExtensions(gc.Extensions), OwnLeaf: own, Active: !p.RemovesSelf,
		Members: membersOf(p.Members(), p.LeafNode)}
	if p.RemovesSelf {
		v.Removal = &ports.Removal{Leaf: own, Epoch: gc.Epoch, TreeHash: gc.TreeHash}
	}
	return v
}

// merge installs the pending commit stored under ns.
func (e *Engine) merge(ctx context.Context, tx ports.Tx, groupID []byte, ns string) (ports.GroupView, error) {
	b, err := tx.Blobs().Get(ctx, ns, key(groupID))
	if errors.Is(err, ports.ErrNotFound) {
		if _, lerr := e.load(ctx, tx, groupID); errors.Is(lerr, ports.ErrGroupNotFound) && ns != nsExternal {
			return ports.GroupView{}, lerr
		}
		return ports.GroupView{}, fmt.Errorf("%w: no commit to merge for %x", ports.ErrNotFound, groupID)
	}
	if err != nil {
		return ports.GroupView{}, err
	}
	var g *group.Group // the group the commit was built on; none for an external commit
	if ns != nsExternal && ns != nsStagedExternal {
		if g, err = e.load(ctx, tx, groupID); err != nil {
			return ports.GroupView{}, err
		}
	}
	p, err := group.LoadPending(b, g, nil)
	if err != nil {
		return ports.GroupView{}, fmt.Errorf("mls engine: stored commit of %x: %w", groupID, err)
	}
	if g == nil {
		return e.mergeExternal(ctx, tx, groupID, p)
	}
	leaf := uint32(g.Leaf())
	if err := g.MergePending(p); err != nil {
		return ports.GroupView{}, err
	}
	if _, err := e.save(ctx, tx, g); err != nil {
		return ports.GroupView{}, err
	}
	// Every staged or pending commit belongs to the old epoch now.
	if err := deleteAll(ctx, tx, groupID, nsStaged, nsPending, nsExternal, nsStagedExternal); err != nil {
		return ports.GroupView{}, err
	}
	var r *ports.Removal
	if p.RemovesSelf {
		gc := g.GroupContext()
		r = &ports.Removal{Leaf: leaf, Epoch: gc.Epoch, TreeHash: gc.TreeHash}
		if err := putRemoval(ctx, tx, groupID, *r); err != nil {
			return ports.GroupView{}, err
		}
	}
	return view(g, r), nil
}

// mergeExternal installs the state of this installation's external
// commit, replacing whatever the engine held for the group.
func (e *Engine) mergeExternal(ctx context.Context, tx ports.Tx, groupID []byte, p *group.Pending) (ports.GroupView, error) {
	g, err := p.Joined()
	if err != nil {
		return ports.GroupView{}, fmt.Errorf("mls engine: stored external commit of %x: %w", groupID, err)
	}
	g.SetPastEpochs(e.opts.PastEpochs)
	if _, err := e.save(ctx, tx, g); err != nil {
		return ports.GroupView{}, err
	}
	if err := deleteAll(ctx, tx, groupID, nsStaged, nsPending, nsExternal, nsStagedExternal, nsRemoval); err != nil {
		return ports.GroupView{}, err
	}
	return view(g, nil), nil
}

// MergeStaged merges the commit staged by the last Process.
func (e *Engine) MergeStaged(ctx context.Context, tx ports.Tx, groupID []byte) (ports.GroupView, error) {
	if _, err := tx.Blobs().Get(ctx, nsStagedExternal, key(groupID)); err == nil {
		return e.merge(ctx, tx, groupID, nsStagedExternal)
	}
	return e.merge(ctx, tx, groupID, nsStaged)
}

// MergePending merges this installation's pending commit, or installs the
// state of its pending external commit.
func (e *Engine) MergePending(ctx context.Context, tx ports.Tx, groupID []byte) (ports.GroupView, error) {
	if _, err := tx.Blobs().Get(ctx, nsExternal, key(groupID)); err == nil {
		return e.merge(ctx, tx, groupID, nsExternal)
	}
	return e.merge(ctx, tx, groupID, nsPending)
}

// ClearPending discards this installation's pending commit or pending
// external commit.
func (e *Engine) ClearPending(ctx context.Context, tx ports.Tx, groupID []byte) error {
	return deleteAll(ctx, tx, groupID, nsPending, nsExternal)
}
