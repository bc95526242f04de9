package treekem

import (
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// Implant installs the keys a joiner learns from the path_secret of its
// GroupSecrets (§12.4.3.1): pathSecret belongs to the lowest common
// ancestor of the joiner's leaf and the committer's, and the secrets of the
// committer's filtered direct path above it follow by DeriveSecret(.,
// "path"). Every derived public key must match the tree.
func (p *PrivateState) Implant(tree *ratchettree.Tree, committer treemath.LeafIndex, pathSecret []byte) error {
	if tree == nil {
		return fmt.Errorf("%w: no tree", ErrPathMismatch)
	}
	anc := treemath.CommonAncestor(p.leaf.Node(), committer.Node())
	fdp := tree.FilteredDirectPath(committer)
	for i, x := range fdp {
		if x != anc {
			continue
		}
		nodes := make([]message.UpdatePathNode, len(fdp)-i)
		for j, y := range fdp[i:] {
			nodes[j].EncryptionKey = tree.EncryptionKey(y)
		}
		privs, _, err := p.derive(tree, fdp[i:], nodes, pathSecret)
		if err != nil {
			return err
		}
		for j, y := range fdp[i:] {
			p.keys[y] = privs[j]
		}
		return nil
	}
	return fmt.Errorf("%w: common ancestor %d of leaves %d and %d is not on the committer's filtered direct path", ErrPathMismatch, anc, p.leaf, committer)
}
