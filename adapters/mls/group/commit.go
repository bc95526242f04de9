package group

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/keyschedule"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
	"github.com/regroup-mls/regroup/adapters/mls/treekem"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// HandleCommit processes another member's commit for the current epoch
// and makes the new epoch current: [Group.StageCommit] followed by
// [Group.MergePending]. When the commit removed this member it returns
// ErrRemoved after merging: the group is then an inactive public view.
func (g *Group) HandleCommit(m *framing.MLSMessage) error {
	p, err := g.StageCommit(m)
	if err != nil {
		return err
	}
	if err := g.MergePending(p); err != nil {
		return err
	}
	if p.RemovesSelf {
		return ErrRemoved
	}
	return nil
}

// StageCommit checks another member's commit for the current epoch
// (§12.4.2) without changing the group: it resolves the proposals (inline
// or cached by reference), validates and applies them in the order of
// §12.3 to a copy of the tree, merges and decrypts the UpdatePath, runs the
// key schedule and checks the confirmation tag. The returned Pending holds
// the new epoch for [Group.MergePending]. For a commit that removes this
// member, Pending.RemovesSelf is set and the new epoch is a public view:
// the member cannot derive its secrets (§12.4.2).
func (g *Group) StageCommit(m *framing.MLSMessage) (*Pending, error) {
	ac, err := g.open(m, false)
	if err != nil {
		return nil, err
	}
	if ac.Content.ContentType != framing.ContentCommit || ac.Content.Commit == nil {
		return nil, invalid("content type %d is not a commit", ac.Content.ContentType)
	}
	external := ac.Content.Sender.Type == framing.SenderNewMemberCommit
	committer := treemath.LeafIndex(ac.Content.Sender.LeafIndex)
	if external {
		committer = noLeaf
	} else if g.priv != nil && committer == g.priv.Leaf() {
		return nil, ErrOwnCommit
	}
	commit := ac.Content.Commit
	props, err := g.resolve(commit, ac.Content.Sender)
	if err != nil {
		return nil, err
	}
	tree := g.tree.Clone()
	ap, err := g.apply(tree, committer, props, external)
	if err != nil {
		return nil, err
	}
	if ap.needPath && commit.Path == nil {
		return nil, invalid("commit without a path where one is required")
	}
	var initSecret []byte
	if g.epoch != nil {
		initSecret = g.epoch.InitSecret
	}
	if external {
		// The joiner takes the leftmost blank leaf (§12.4.3.2).
		if committer, err = tree.AddLeaf(&commit.Path.LeafNode); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		if g.priv != nil {
			if initSecret, err = g.externalInitSecret(ap.kemOutput); err != nil {
				return nil, err
			}
		}
	}
	var priv *treekem.PrivateState
	// Removal is decided from the Remove proposals, not from a blank leaf:
	// a commit that removes this member and adds it back (a readd) can
	// put the new leaf where the old one was.
	removed := g.priv != nil && slices.Contains(ap.removed, g.priv.Leaf())
	if g.priv != nil && !removed {
		priv = g.priv.Clone()
	}
	if priv != nil {
		own := tree.Leaf(g.priv.Leaf())
		if k, ok := g.leafKeys[string(own.EncryptionKey)]; ok {
			priv.SetLeafKey(k) // our own Update was committed
		}
	}
	// The provisional group context keeps the old confirmed transcript hash.
	gc := g.gc
	gc.Epoch++
	gc.Extensions = ap.extensions
	commitSecret := make([]byte, g.suite.HashSize())
	if commit.Path != nil {
		if commitSecret, err = g.mergePath(tree, priv, committer, commit.Path, ap.added, &gc, external); err != nil {
			return nil, err
		}
	} else if gc.TreeHash, err = tree.TreeHash(); err != nil {
		return nil, err
	}
	if priv == nil { // a public view, or a member this commit removes
		next, err := g.nextPublic(ac, gc, tree)
		if err != nil {
			return nil, err
		}
		next.reinit = ap.reinit
		return &Pending{Message: m, next: next, RemovesSelf: removed, Sender: ac.Content.Sender, AuthenticatedData: ac.Content.AuthenticatedData,
			Proposals: commitProposals(props)}, nil
	}
	next, err := g.nextEpoch(ac, gc, tree, priv, commitSecret, ap.psks, initSecret, true)
	if err != nil {
		return nil, err
	}
	next.reinit = ap.reinit
	return &Pending{Message: m, next: next, Sender: ac.Content.Sender, AuthenticatedData: ac.Content.AuthenticatedData,
		Proposals: commitProposals(props)}, nil
}

// mergePath verifies the committer's new leaf, merges the path into tree,
// sets gc's tree hash and decrypts the commit secret (§7.5, §12.4.2).
func (g *Group) mergePath(tree *ratchettree.Tree, priv *treekem.PrivateState, committer treemath.LeafIndex,
	path *message.UpdatePath, added []treemath.LeafIndex, gc *message.GroupContext, external bool) ([]byte, error) {
	ln := &path.LeafNode
	if ln.Source != message.SourceCommit {
		return nil, invalidAs(ErrLeafNode, "path leaf source %d", ln.Source)
	}
	if err := supports(ln, gc.Extensions); err != nil {
		return nil, leafError(err)
	}
	if err := credentialsCompatible(tree, ln, int64(committer)); err != nil {
		return nil, leafError(err)
	}
	if err := ln.Verify(g.suite, g.gc.GroupID, uint32(committer)); err != nil {
		return nil, invalidAs(ErrLeafNode, "path leaf: %w", err)
	}
	if old := tree.Leaf(committer); !external && old != nil && bytes.Equal(old.EncryptionKey, ln.EncryptionKey) {
		return nil, invalidAs(ErrLeafNode, "path leaf reuses the committer's encryption key")
	}
	for _, m := range tree.Members() {
		if other := tree.Leaf(m); m != committer && (bytes.Equal(other.SignatureKey, ln.SignatureKey) || bytes.Equal(other.EncryptionKey, ln.EncryptionKey)) {
			return nil, invalidAs(ErrLeafNode, "path leaf reuses a key of leaf %d", m)
		}
	}
	for _, n := range path.Nodes {
		for x := 0; x < tree.Width(); x++ {
			if bytes.Equal(tree.EncryptionKey(treemath.NodeIndex(x)), n.EncryptionKey) {
				return nil, invalid("path key already in the tree at node %d", x)
			}
		}
	}
	if err := treekem.Merge(tree, committer, path); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	th, err := tree.TreeHash()
	if err != nil {
		return nil, err
	}
	gc.TreeHash = th
	gcBytes, err := codec.Marshal(gc)
	if err != nil {
		return nil, err
	}
	if priv == nil { // a public view has no keys to decrypt with
		return nil, checkPathCiphertexts(tree, committer, path, added)
	}
	commitSecret, _, err := priv.Decrypt(tree, committer, path, added, gcBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return commitSecret, nil
}

// noLeaf stands for the committer of an external commit before it has a leaf.
const noLeaf = treemath.LeafIndex(1<<32 - 1)

// externalInitSecret is the group side of §8.3: the init secret an external
// joiner exported to external_pub, recovered from its KEM output.
func (g *Group) externalInitSecret(kemOutput []byte) ([]byte, error) {
	priv, _, err := keyschedule.ExternalKeyPair(g.suite, g.epoch.ExternalSecret)
	if err != nil {
		return nil, err
	}
	secret, err := keyschedule.ExternalInitSecretFromKEMOutput(g.suite, priv, kemOutput)
	if err != nil {
		return nil, fmt.Errorf("%w: external init: %w", ErrInvalid, err)
	}
	return secret, nil
}
