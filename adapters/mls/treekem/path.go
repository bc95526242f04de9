package treekem

import (
	"bytes"
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// encryptLabel is the EncryptWithLabel label of path secrets (§7.6).
const encryptLabel = "UpdatePathNode"

// copathChild returns the child of p that is not on the direct path of x.
func copathChild(p, x treemath.NodeIndex, n treemath.LeafCount) treemath.NodeIndex {
	l, _ := treemath.Left(p)
	r, _ := treemath.Right(p, n)
	if x < p {
		return r
	}
	return l
}

// applyPathKeys blanks the sender's direct path, installs the new public
// keys on its filtered direct path and computes their parent hashes top
// down (§7.5, §7.9). It returns the parent hash the sender's leaf must carry.
func applyPathKeys(tree *ratchettree.Tree, sender treemath.LeafIndex, keys [][]byte) ([]byte, error) {
	fdp := tree.FilteredDirectPath(sender)
	if len(fdp) != len(keys) {
		return nil, fmt.Errorf("%w: %d path nodes for a filtered direct path of %d", ErrPathMismatch, len(keys), len(fdp))
	}
	if err := tree.BlankPath(sender); err != nil {
		return nil, err
	}
	for i, x := range fdp {
		if err := tree.SetParent(x, &message.ParentNode{EncryptionKey: keys[i], UnmergedLeaves: []uint32{}}); err != nil {
			return nil, err
		}
	}
	n := tree.LeafCount()
	var above []byte // parent hash of the node above, empty at the root
	for i := len(fdp) - 1; i >= 0; i-- {
		if err := tree.SetParentHash(fdp[i], above); err != nil {
			return nil, err
		}
		below := sender.Node()
		if i > 0 {
			below = fdp[i-1]
		}
		ph, err := tree.ParentHash(fdp[i], copathChild(fdp[i], below, n))
		if err != nil {
			return nil, err
		}
		above = ph
	}
	if above == nil {
		above = []byte{}
	}
	return above, nil
}

// Merge applies a received UpdatePath from sender to tree (§7.5 "merges
// UpdatePath into the tree"): it replaces the sender's direct path with the
// path's keys, checks that the new leaf's parent_hash matches, and installs
// the leaf. The caller verifies the leaf node itself (signature, §7.3).
func Merge(tree *ratchettree.Tree, sender treemath.LeafIndex, path *message.UpdatePath) error {
	if tree == nil || path == nil {
		return fmt.Errorf("%w: no tree or path", ErrPathMismatch)
	}
	if tree.Leaf(sender) == nil {
		return fmt.Errorf("%w: sender leaf %d is blank", ErrPathMismatch, sender)
	}
	keys := make([][]byte, len(path.Nodes))
	for i := range path.Nodes {
		keys[i] = path.Nodes[i].EncryptionKey
	}
	ph, err := applyPathKeys(tree, sender, keys)
	if err != nil {
		return err
	}
	if path.LeafNode.Source != message.SourceCommit || !bytes.Equal(path.LeafNode.ParentHash, ph) {
		return fmt.Errorf("%w: leaf %d", ErrParentHash, sender)
	}
	leaf := path.LeafNode
	return tree.SetLeaf(sender, &leaf)
}

// Decrypt recovers the path secret meant for p from an UpdatePath already
// merged into tree, derives the keys of the sender's filtered direct path
// above it (checking them against the path) and returns the commit_secret
// and the decrypted path secret (§7.5). exclude lists the leaves added by
// the same commit; groupContext is the provisional GroupContext encoding.
func (p *PrivateState) Decrypt(tree *ratchettree.Tree, sender treemath.LeafIndex, path *message.UpdatePath,
	exclude []treemath.LeafIndex, groupContext []byte) (commitSecret, pathSecret []byte, err error) {
	if tree == nil || path == nil {
		return nil, nil, fmt.Errorf("%w: no tree or path", ErrPathMismatch)
	}
	if sender == p.leaf {
		return nil, nil, fmt.Errorf("%w: own update path", ErrDecrypt)
	}
	n := tree.LeafCount()
	ex := excludeSet(exclude)
	fdp := tree.FilteredDirectPath(sender)
	if len(fdp) != len(path.Nodes) {
		return nil, nil, fmt.Errorf("%w: %d path nodes for a filtered direct path of %d", ErrPathMismatch, len(path.Nodes), len(fdp))
	}
	for i, x := range fdp {
		below := sender.Node()
		if i > 0 {
			below = fdp[i-1]
		}
		c := copathChild(x, below, n)
		if !treemath.IsAncestor(c, p.leaf.Node(), n) && c != p.leaf.Node() {
			continue
		}
		res := tree.ResolutionExcluding(c, ex)
		if len(res) != len(path.Nodes[i].EncryptedPathSecret) {
			return nil, nil, fmt.Errorf("%w: %d ciphertexts for a resolution of %d", ErrPathMismatch, len(path.Nodes[i].EncryptedPathSecret), len(res))
		}
		for k, r := range res {
			priv, ok := p.usableKey(tree, r)
			if !ok {
				continue
			}
			ct := path.Nodes[i].EncryptedPathSecret[k]
			ps, err := tree.Suite().DecryptWithLabel(priv, encryptLabel, groupContext, ct.KEMOutput, ct.Ciphertext)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: %v", ErrDecrypt, err)
			}
			cs, err := p.install(tree, sender, fdp[i:], path.Nodes[i:], ps)
			return cs, ps, err
		}
		return nil, nil, fmt.Errorf("%w: no key for the resolution of node %d", ErrNoKey, c)
	}
	return nil, nil, fmt.Errorf("%w: leaf %d is not below the sender's path", ErrDecrypt, p.leaf)
}

// derive computes the key pairs of nodes from path secret ps upward,
// checking each public key against pathNodes, and returns the private keys
// and the secret after the last node (the commit secret).
func (p *PrivateState) derive(tree *ratchettree.Tree, nodes []treemath.NodeIndex, pathNodes []message.UpdatePathNode, ps []byte) ([][]byte, []byte, error) {
	s := tree.Suite()
	privs := make([][]byte, len(nodes))
	cur := append([]byte(nil), ps...)
	for i := range nodes {
		priv, pub, err := NodeKeyPair(s, cur)
		if err != nil {
			return nil, nil, err
		}
		if !bytes.Equal(pub, pathNodes[i].EncryptionKey) {
			return nil, nil, fmt.Errorf("%w: derived key differs at node %d", ErrDecrypt, nodes[i])
		}
		privs[i] = priv
		next, err := s.DeriveSecret(cur, "path")
		clear(cur)
		if err != nil {
			return nil, nil, err
		}
		cur = next
	}
	return privs, cur, nil
}

// install derives the keys of nodes from path secret ps upward, replaces
// the old keys of the sender's direct path and returns the commit secret.
func (p *PrivateState) install(tree *ratchettree.Tree, sender treemath.LeafIndex, nodes []treemath.NodeIndex,
	pathNodes []message.UpdatePathNode, ps []byte) ([]byte, error) {
	privs, commit, err := p.derive(tree, nodes, pathNodes, ps)
	if err != nil {
		return nil, err
	}
	for _, x := range treemath.DirectPath(sender.Node(), tree.LeafCount()) {
		p.Forget(x)
	}
	for i, x := range nodes {
		p.keys[x] = privs[i]
	}
	return commit, nil
}

func excludeSet(ls []treemath.LeafIndex) map[treemath.LeafIndex]bool {
	m := make(map[treemath.LeafIndex]bool, len(ls))
	for _, l := range ls {
		m[l] = true
	}
	return m
}
