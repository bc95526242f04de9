package mls

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/ports"
)

var _ ports.MLSPendingCommits = (*Engine)(nil)

// Commit builds a commit (a PublicMessage) that stays pending until
// MergePending or ClearPending.
func (e *Engine) Commit(ctx context.Context, tx ports.Tx, groupID []byte, opts ports.CommitOptions) (ports.CommitOutput, error) {
	g, err := e.active(ctx, tx, groupID)
	if err != nil {
		return ports.CommitOutput{}, err
	}
	co := &group.CommitOptions{Path: opts.ForcePath, WireFormat: framing.WirePublicMessage, TreeInWelcome: true}
	if keep := opts.IncludeByReference; keep != nil {
		co.KeepByReference = func(p *message.Proposal, s framing.Sender) bool {
			return keep(cachedProposal(g, p, s))
		}
	}
	if opts.GroupContextExtensions != nil {
		co.Proposals = append(co.Proposals, &message.Proposal{Type: message.ProposalGroupContextExtensions,
			GroupContextExtensions: &message.GroupContextExtensions{Extensions: toExtensions(opts.GroupContextExtensions)}})
	}
	for _, l := range opts.Remove {
		co.Proposals = append(co.Proposals, &message.Proposal{Type: message.ProposalRemove, Remove: &message.Remove{Removed: l}})
	}
	for _, b := range opts.Add {
		kp, err := decodeKeyPackage(b)
		if err != nil {
			return ports.CommitOutput{}, err
		}
		co.Proposals = append(co.Proposals, &message.Proposal{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *kp}})
	}
	p, err := g.Commit(co)
	if err != nil {
		return ports.CommitOutput{}, fmt.Errorf("%w: %v", ports.ErrInvalid, err)
	}
	out, err := output(g, p)
	if err != nil {
		return ports.CommitOutput{}, err
	}
	b, err := p.MarshalChanges(true) // PendingCommit hands the message back
	if err != nil {
		return ports.CommitOutput{}, err
	}
	if err := tx.Blobs().Put(ctx, nsPending, key(groupID), b); err != nil {
		return ports.CommitOutput{}, err
	}
	return out, deleteAll(ctx, tx, groupID, nsExternal) // one pending commit at a time
}

// output describes a pending commit of this installation; g is the state
// it was built on (nil for an external commit into a group not held).
func output(g *group.Group, p *group.Pending) (ports.CommitOutput, error) {
	staged := pendingView(p, g)
	out := ports.CommitOutput{Staged: staged, Proposals: proposals(g, &staged, p.Proposals)}
	var err error
	if out.Commit, err = codec.Marshal(p.Message); err != nil {
		return ports.CommitOutput{}, err
	}
	if p.Welcome != nil {
		if out.Welcome, err = codec.Marshal(&framing.MLSMessage{Version: message.MLS10, WireFormat: framing.WireWelcome, Welcome: p.Welcome}); err != nil {
			return ports.CommitOutput{}, err
		}
	}
	gi, err := p.GroupInfo(true)
	if err != nil {
		return ports.CommitOutput{}, err
	}
	if out.GroupInfo, err = codec.Marshal(&framing.MLSMessage{Version: message.MLS10, WireFormat: framing.WireGroupInfo, GroupInfo: gi}); err != nil {
		return ports.CommitOutput{}, err
	}
	return out, nil
}

// PendingCommit returns this installation's pending commit of the group
// as Commit (or JoinExternal) returned it.
func (e *Engine) PendingCommit(ctx context.Context, tx ports.Tx, groupID []byte) (ports.CommitOutput, error) {
	ns := nsPending
	b, err := tx.Blobs().Get(ctx, ns, key(groupID))
	if errors.Is(err, ports.ErrNotFound) {
		ns = nsExternal
		b, err = tx.Blobs().Get(ctx, ns, key(groupID))
	}
	if errors.Is(err, ports.ErrNotFound) {
		return ports.CommitOutput{}, fmt.Errorf("%w: no pending commit for %x", ports.ErrNotFound, groupID)
	}
	if err != nil {
		return ports.CommitOutput{}, err
	}
	var g *group.Group // the group the commit was built on; none for an external commit
	if ns == nsPending {
		if g, err = e.load(ctx, tx, groupID); err != nil {
			return ports.CommitOutput{}, err
		}
	}
	p, err := group.LoadPending(b, g, nil)
	if err != nil {
		return ports.CommitOutput{}, fmt.Errorf("mls engine: stored commit of %x: %w", groupID, err)
	}
	if p.Proposals, err = g.PendingProposals(p); err != nil {
		return ports.CommitOutput{}, fmt.Errorf("mls engine: stored commit of %x: %w", groupID, err)
	}
	return output(g, p)
}

// proposals describes a commit's resolved proposals. old is the state the
// commit applies to (nil when not held) and staged the state it leads to.
func proposals(old *group.Group, staged *ports.GroupView, cps []group.CommitProposal) []ports.Proposal {
	if len(cps) == 0 {
		return nil
	}
	out := make([]ports.Proposal, 0, len(cps))
	for _, cp := range cps {
		pr := cp.Proposal
		p := ports.Proposal{Type: uint16(pr.Type), SenderType: ports.SenderType(cp.Sender.Type), ByReference: cp.ByReference,
			Sender: ports.Member{LeafIndex: cp.Sender.LeafIndex}}
		if cp.Sender.Type == framing.SenderMember {
			p.Sender = toMember(cp.Sender.LeafIndex, leafAt(old, cp.Sender.LeafIndex))
		}
		switch {
		case pr.Type == message.ProposalAdd && pr.Add != nil:
			kp := &pr.Add.KeyPackage
			p.KeyPackage, _ = codec.Marshal(kp)
			p.Added = toMember(ports.NoLeaf, &kp.LeafNode)
			for _, m := range staged.Members {
				if bytes.Equal(m.SignatureKey, kp.LeafNode.SignatureKey) && bytes.Equal(m.EncryptionKey, kp.LeafNode.EncryptionKey) {
					p.Added = m
				}
			}
		case pr.Type == message.ProposalRemove && pr.Remove != nil:
			p.Removed = toMember(pr.Remove.Removed, leafAt(old, pr.Remove.Removed))
		case pr.Type == message.ProposalSelfRemove && cp.Sender.Type == framing.SenderMember:
			p.Removed = toMember(cp.Sender.LeafIndex, leafAt(old, cp.Sender.LeafIndex))
		case pr.Type == message.ProposalUpdate && pr.Update != nil:
			p.Updated = toMember(cp.Sender.LeafIndex, &pr.Update.LeafNode)
		case pr.Type == message.ProposalGroupContextExtensions && pr.GroupContextExtensions != nil:
			p.Extensions = fromExtensions(pr.GroupContextExtensions.Extensions)
		}
		out = append(out, p)
	}
	return out
}

// leafAt returns the leaf at i of g's current tree; nil when blank or g
// is nil.
func leafAt(g *group.Group, i uint32) *message.LeafNode {
	if g == nil {
		return nil
	}
	return g.LeafNode(treeLeaf(i))
}
