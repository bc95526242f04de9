package mls

import (
	"bytes"
	"context"
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/ports"
)

var _ ports.MLSExternal = (*Engine)(nil)

// GroupInfo returns the signed GroupInfo of the group's current epoch,
// with the ratchet_tree and external_pub extensions, as an MLSMessage.
func (e *Engine) GroupInfo(ctx context.Context, tx ports.Tx, groupID []byte) ([]byte, error) {
	g, err := e.active(ctx, tx, groupID)
	if err != nil {
		return nil, err
	}
	gi, err := g.GroupInfo(true)
	if err != nil {
		return nil, err
	}
	return codec.Marshal(&framing.MLSMessage{Version: message.MLS10, WireFormat: framing.WireGroupInfo, GroupInfo: gi})
}

// JoinExternal builds an external commit into the group groupInfo
// describes; it stays pending until MergePending installs the joined state
// or ClearPending drops it.
func (e *Engine) JoinExternal(ctx context.Context, tx ports.Tx, groupInfo []byte, opts ports.ExternalJoinOptions) (ports.CommitOutput, error) {
	m, err := framing.Decode(groupInfo)
	if err != nil || m.GroupInfo == nil {
		return ports.CommitOutput{}, fmt.Errorf("%w: not a GroupInfo", ports.ErrInvalid)
	}
	if m.Version != message.MLS10 || m.GroupInfo.GroupContext.CipherSuite != e.suite.ID() {
		return ports.CommitOutput{}, fmt.Errorf("%w: group info of version %d suite %#04x", ports.ErrUnsupported, m.Version, uint16(m.GroupInfo.GroupContext.CipherSuite))
	}
	kp, err := decodeKeyPackage(opts.KeyPackage.KeyPackage)
	if err != nil {
		return ports.CommitOutput{}, err
	}
	// The group as the GroupInfo shows it: verified, and the tree the
	// resync leaf and the proposals are read from.
	pub, err := group.NewPublic(e.suite, m.GroupInfo, nil)
	if err != nil {
		return ports.CommitOutput{}, fmt.Errorf("%w: group info: %v", ports.ErrInvalid, err)
	}
	leaf := kp.LeafNode
	xo := &group.ExternalJoinOptions{GroupInfo: m.GroupInfo, Leaf: &leaf, SignaturePriv: e.opts.SignaturePrivateKey}
	if opts.Resync && opts.Recover {
		return ports.CommitOutput{}, fmt.Errorf("%w: resync and recover are exclusive", ports.ErrInvalidArgument)
	}
	if opts.Recover {
		tree := pub.Tree()
		for _, l := range tree.Members() {
			old := tree.Leaf(l)
			if !bytes.Equal(old.SignatureKey, leaf.SignatureKey) && old.Credential.Type == leaf.Credential.Type &&
				bytes.Equal(old.Credential.Identity, leaf.Credential.Identity) {
				xo.Resync = &l // the same Remove of a leaf with the joiner's credential
				break
			}
		}
		if xo.Resync == nil {
			return ports.CommitOutput{}, fmt.Errorf("%w: recover: no other leaf with this installation's credential in the group info's tree", ports.ErrNotFound)
		}
	}
	if opts.Resync {
		tree := pub.Tree()
		for _, l := range tree.Members() {
			if bytes.Equal(tree.Leaf(l).SignatureKey, leaf.SignatureKey) {
				xo.Resync = &l
			}
		}
		if xo.Resync == nil {
			return ports.CommitOutput{}, fmt.Errorf("%w: resync: this installation has no leaf in the group info's tree", ports.ErrInvalid)
		}
	}
	p, err := group.JoinExternalPending(e.suite, xo)
	if err != nil {
		return ports.CommitOutput{}, fmt.Errorf("%w: external commit: %v", ports.ErrInvalid, err)
	}
	out, err := output(pub, p)
	if err != nil {
		return ports.CommitOutput{}, err
	}
	b, err := p.Marshal()
	if err != nil {
		return ports.CommitOutput{}, err
	}
	gid := m.GroupInfo.GroupContext.GroupID
	if err := deleteAll(ctx, tx, gid, nsPending); err != nil { // one pending commit at a time
		return ports.CommitOutput{}, err
	}
	return out, tx.Blobs().Put(ctx, nsExternal, key(gid), b)
}
