package mls

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/ports"
)

// Blob namespaces.
const (
	nsGroup   = "mls.group"
	nsStaged  = "mls.staged"
	nsPending = "mls.pending"
	nsWelcome = "mls.welcome"
)

func key(groupID []byte) string { return hex.EncodeToString(groupID) }

// load reads a group's state, or an error wrapping ports.ErrGroupNotFound.
func (e *Engine) load(ctx context.Context, tx ports.Tx, groupID []byte) (*group.Group, error) {
	b, err := tx.Blobs().Get(ctx, nsGroup, key(groupID))
	if errors.Is(err, ports.ErrNotFound) {
		return nil, fmt.Errorf("%w: %x", ports.ErrGroupNotFound, groupID)
	}
	if err != nil {
		return nil, err
	}
	g, err := group.Load(b, nil)
	if err != nil {
		return nil, fmt.Errorf("mls engine: stored state of %x: %w", groupID, err)
	}
	g.SetPastEpochs(e.opts.PastEpochs)
	return g, nil
}

// save writes a group's state.
func save(ctx context.Context, tx ports.Tx, g *group.Group) error {
	b, err := g.Marshal()
	if err != nil {
		return err
	}
	return tx.Blobs().Put(ctx, nsGroup, key(g.GroupContext().GroupID), b)
}

func (e *Engine) active(ctx context.Context, tx ports.Tx, groupID []byte) (*group.Group, error) {
	g, err := e.load(ctx, tx, groupID)
	if err != nil {
		return nil, err
	}
	if !g.Active() {
		return nil, fmt.Errorf("%w: %x", ports.ErrInactive, groupID)
	}
	return g, nil
}

// CreateGroup creates a group with this installation, as signer's leaf, as
// its only member.
func (e *Engine) CreateGroup(ctx context.Context, tx ports.Tx, groupID []byte, signer ports.KeyPackageBundle, extensions []ports.Extension) (ports.GroupView, error) {
	kp, err := decodeKeyPackage(signer.KeyPackage)
	if err != nil {
		return ports.GroupView{}, err
	}
	leaf := kp.LeafNode
	g, err := group.Create(e.suite, &group.CreateOptions{GroupID: groupID, Leaf: &leaf,
		EncryptionPriv: signer.EncryptionPrivateKey, SignaturePriv: e.opts.SignaturePrivateKey, Extensions: toExtensions(extensions)})
	if err != nil {
		return ports.GroupView{}, fmt.Errorf("create group: %w", err)
	}
	g.SetPastEpochs(e.opts.PastEpochs)
	if err := save(ctx, tx, g); err != nil {
		return ports.GroupView{}, err
	}
	return view(g), nil
}

// Group returns the group's current public state.
func (e *Engine) Group(ctx context.Context, tx ports.Tx, groupID []byte) (ports.GroupView, error) {
	g, err := e.load(ctx, tx, groupID)
	if err != nil {
		return ports.GroupView{}, err
	}
	return view(g), nil
}

func member(g *group.Group, s framing.Sender) ports.Member {
	m := ports.Member{LeafIndex: s.LeafIndex}
	if s.Type != framing.SenderMember {
		return m
	}
	if leaf := g.Tree().Leaf(treeLeaf(s.LeafIndex)); leaf != nil {
		m.SignatureKey, m.InboxID = leaf.SignatureKey, inboxID(&leaf.Credential)
	}
	return m
}

// Process processes one MLSMessage of the group; a commit is staged for
// MergeStaged.
func (e *Engine) Process(ctx context.Context, tx ports.Tx, groupID, msg []byte) (ports.Processed, error) {
	g, err := e.active(ctx, tx, groupID)
	if err != nil {
		return ports.Processed{}, err
	}
	m, err := framing.Decode(msg)
	if err != nil {
		return ports.Processed{}, fmt.Errorf("%w: %v", ports.ErrInvalid, err)
	}
	r, err := g.Process(m)
	if err != nil {
		return ports.Processed{}, processError(err)
	}
	out := ports.Processed{AuthenticatedData: r.AuthenticatedData, Sender: ports.Member{LeafIndex: r.Sender.LeafIndex}}
	if l := r.SenderLeaf; l != nil { // the sender as it was in the message's epoch
		out.Sender.SignatureKey, out.Sender.InboxID = l.SignatureKey, inboxID(&l.Credential)
	}
	switch r.ContentType {
	case framing.ContentApplication:
		out.Kind, out.Application = ports.ProcessedApplication, r.Application
	case framing.ContentProposal:
		out.Kind = ports.ProcessedProposal
	case framing.ContentCommit:
		b, err := r.Pending.Marshal()
		if err != nil {
			return ports.Processed{}, err
		}
		if err := tx.Blobs().Put(ctx, nsStaged, key(groupID), b); err != nil {
			return ports.Processed{}, err
		}
		staged := pendingView(r.Pending, g)
		out.Kind, out.Staged, out.RemovesSelf = ports.ProcessedCommit, &staged, r.Pending.RemovesSelf
	}
	// The secret tree and proposal cache moved on: keep them.
	return out, save(ctx, tx, g)
}

// pendingView describes the epoch a pending commit leads to.
func pendingView(p *group.Pending, g *group.Group) ports.GroupView {
	gc := p.GroupContext()
	tree := p.Tree()
	v := ports.GroupView{GroupID: gc.GroupID, Epoch: gc.Epoch, EpochAuthenticator: p.EpochAuthenticator(),
		TreeHash: gc.TreeHash, Extensions: fromExtensions(gc.Extensions), OwnLeaf: uint32(g.Leaf()), Active: !p.RemovesSelf}
	for _, l := range tree.Members() {
		leaf := tree.Leaf(l)
		v.Members = append(v.Members, ports.Member{LeafIndex: uint32(l), SignatureKey: leaf.SignatureKey, InboxID: inboxID(&leaf.Credential)})
	}
	return v
}

// merge installs the pending commit stored under ns.
func (e *Engine) merge(ctx context.Context, tx ports.Tx, groupID []byte, ns string) (ports.GroupView, error) {
	g, err := e.load(ctx, tx, groupID)
	if err != nil {
		return ports.GroupView{}, err
	}
	b, err := tx.Blobs().Get(ctx, ns, key(groupID))
	if errors.Is(err, ports.ErrNotFound) {
		return ports.GroupView{}, fmt.Errorf("%w: no commit to merge for %x", ports.ErrNotFound, groupID)
	}
	if err != nil {
		return ports.GroupView{}, err
	}
	p, err := group.LoadPending(b, nil)
	if err != nil {
		return ports.GroupView{}, fmt.Errorf("mls engine: stored commit of %x: %w", groupID, err)
	}
	if err := g.MergePending(p); err != nil {
		return ports.GroupView{}, err
	}
	if err := save(ctx, tx, g); err != nil {
		return ports.GroupView{}, err
	}
	for _, n := range []string{nsStaged, nsPending} { // both belong to the old epoch now
		if err := tx.Blobs().Delete(ctx, n, key(groupID)); err != nil {
			return ports.GroupView{}, err
		}
	}
	return view(g), nil
}

// MergeStaged merges the commit staged by the last Process.
func (e *Engine) MergeStaged(ctx context.Context, tx ports.Tx, groupID []byte) (ports.GroupView, error) {
	return e.merge(ctx, tx, groupID, nsStaged)
}

// MergePending merges this installation's pending commit.
func (e *Engine) MergePending(ctx context.Context, tx ports.Tx, groupID []byte) (ports.GroupView, error) {
	return e.merge(ctx, tx, groupID, nsPending)
}

// ClearPending discards this installation's pending commit.
func (e *Engine) ClearPending(ctx context.Context, tx ports.Tx, groupID []byte) error {
	return tx.Blobs().Delete(ctx, nsPending, key(groupID))
}

// Commit builds a commit (a PublicMessage) that stays pending until
// MergePending or ClearPending.
func (e *Engine) Commit(ctx context.Context, tx ports.Tx, groupID []byte, opts ports.CommitOptions) (ports.CommitOutput, error) {
	g, err := e.active(ctx, tx, groupID)
	if err != nil {
		return ports.CommitOutput{}, err
	}
	co := &group.CommitOptions{Path: opts.ForcePath, WireFormat: framing.WirePublicMessage, TreeInWelcome: true}
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
	out := ports.CommitOutput{Staged: pendingView(p, g)}
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
	b, err := p.Marshal()
	if err != nil {
		return ports.CommitOutput{}, err
	}
	if err := tx.Blobs().Put(ctx, nsPending, key(groupID), b); err != nil {
		return ports.CommitOutput{}, err
	}
	return out, nil
}

// Encrypt protects an application message as a PrivateMessage.
func (e *Engine) Encrypt(ctx context.Context, tx ports.Tx, groupID, plaintext, authenticatedData []byte) ([]byte, error) {
	g, err := e.active(ctx, tx, groupID)
	if err != nil {
		return nil, err
	}
	m, err := g.ProtectWithAuthenticatedData(plaintext, authenticatedData)
	if err != nil {
		return nil, err
	}
	b, err := codec.Marshal(m)
	if err != nil {
		return nil, err
	}
	return b, save(ctx, tx, g) // the sender's ratchet advanced
}

// Export derives an exporter secret (RFC 9420 §8.5).
func (e *Engine) Export(ctx context.Context, tx ports.Tx, groupID []byte, label string, context []byte, length int) ([]byte, error) {
	g, err := e.active(ctx, tx, groupID)
	if err != nil {
		return nil, err
	}
	return g.Export(label, context, length)
}

// newHandle returns a random handle for a staged Welcome.
func newHandle() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
