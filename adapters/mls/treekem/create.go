package treekem

import (
	"crypto/rand"
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
	"github.com/regroup-mls/regroup/internal/mlstesthook"
)

// CreatedPath is the result of [PrivateState.CreatePath].
type CreatedPath struct {
	// Path is the UpdatePath to send in the commit.
	Path *message.UpdatePath
	// CommitSecret is the commit_secret of the new epoch.
	CommitSecret []byte
	// PathSecrets holds the path secret of each node of the filtered direct
	// path, for the Welcome of members added by the same commit. The caller
	// erases them once the Welcome is built.
	PathSecrets map[treemath.NodeIndex][]byte
}

// CreatePath builds the committer's UpdatePath (§7.4–7.6) and applies it to
// tree and to p. leaf is the template of the new leaf node: CreatePath sets
// its encryption key to a fresh key pair, its source to commit, its parent
// hash, and signs it with sigPriv for groupID. exclude lists leaves added by
// the same commit. groupContext returns the provisional GroupContext
// encoding for the tree hash after the path is applied; path secrets are
// encrypted under it.
func (p *PrivateState) CreatePath(tree *ratchettree.Tree, leaf *message.LeafNode, sigPriv, groupID []byte,
	exclude []treemath.LeafIndex, groupContext func(treeHash []byte) ([]byte, error)) (*CreatedPath, error) {
	if tree == nil || leaf == nil || groupContext == nil {
		return nil, fmt.Errorf("%w: no tree, leaf or group context", ErrPathMismatch)
	}
	s := tree.Suite()
	if tree.Leaf(p.leaf) == nil {
		return nil, fmt.Errorf("%w: own leaf %d is blank", ErrPathMismatch, p.leaf)
	}
	fdp := tree.FilteredDirectPath(p.leaf)
	secrets := make([][]byte, len(fdp)+1) // the last one is the commit secret
	secrets[0] = make([]byte, s.HashSize())
	if _, err := rand.Read(secrets[0]); err != nil {
		return nil, fmt.Errorf("create path: %w", err)
	}
	privs := make([][]byte, len(fdp))
	pubs := make([][]byte, len(fdp))
	for i := range fdp {
		var err error
		if privs[i], pubs[i], err = NodeKeyPair(s, secrets[i]); err != nil {
			return nil, err
		}
		if secrets[i+1], err = s.DeriveSecret(secrets[i], "path"); err != nil {
			return nil, err
		}
	}
	leafPriv, leafPub, err := s.GenerateHPKEKey()
	if err != nil {
		return nil, err
	}
	ph, err := applyPathKeys(tree, p.leaf, pubs)
	if err != nil {
		return nil, err
	}
	nl := *leaf
	nl.EncryptionKey, nl.Source, nl.ParentHash = leafPub, message.SourceCommit, ph
	if err := nl.Sign(s, sigPriv, groupID, uint32(p.leaf)); err != nil {
		return nil, err
	}
	if err := tree.SetLeaf(p.leaf, &nl); err != nil {
		return nil, err
	}
	th, err := tree.TreeHash()
	if err != nil {
		return nil, err
	}
	gc, err := groupContext(th)
	if err != nil {
		return nil, fmt.Errorf("create path: group context: %w", err)
	}
	path := &message.UpdatePath{LeafNode: nl, Nodes: make([]message.UpdatePathNode, len(fdp))}
	ex := excludeSet(exclude)
	n := tree.LeafCount()
	for i, x := range fdp {
		below := p.leaf.Node()
		if i > 0 {
			below = fdp[i-1]
		}
		node := message.UpdatePathNode{EncryptionKey: pubs[i], EncryptedPathSecret: []message.HPKECiphertext{}}
		for _, r := range tree.ResolutionExcluding(copathChild(x, below, n), ex) {
			secret := secrets[i]
			if !mlstesthook.RealPathSecret(groupID, uint32(p.leaf), uint32(r)) {
				secret = make([]byte, len(secret)) // a hostile test client's selective path
				if _, err := rand.Read(secret); err != nil {
					return nil, fmt.Errorf("create path: %w", err)
				}
			}
			kem, ct, err := s.EncryptWithLabel(tree.EncryptionKey(r), encryptLabel, gc, secret)
			if err != nil {
				return nil, fmt.Errorf("create path: encrypt to node %d: %w", r, err)
			}
			node.EncryptedPathSecret = append(node.EncryptedPathSecret, message.HPKECiphertext{KEMOutput: kem, Ciphertext: ct})
		}
		path.Nodes[i] = node
	}
	for _, x := range treemath.DirectPath(p.leaf.Node(), n) {
		p.Forget(x)
	}
	p.Forget(p.leaf.Node())
	p.keys[p.leaf.Node()] = leafPriv
	for i, x := range fdp {
		p.keys[x] = privs[i]
	}
	out := &CreatedPath{Path: path, CommitSecret: secrets[len(fdp)], PathSecrets: make(map[treemath.NodeIndex][]byte, len(fdp))}
	for i, x := range fdp {
		out.PathSecrets[x] = secrets[i]
	}
	return out, nil
}
