package group

import (
	"bytes"
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/keyschedule"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
	"github.com/regroup-mls/regroup/adapters/mls/treekem"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
	"github.com/regroup-mls/regroup/adapters/mls/welcome"
)

// JoinOptions are the joiner's secrets and what the Welcome may not carry.
type JoinOptions struct {
	KeyPackage     *message.KeyPackage
	InitPriv       []byte
	EncryptionPriv []byte
	SignaturePriv  []byte
	// Tree is used when the GroupInfo has no ratchet_tree extension.
	Tree message.RatchetTree
	// PSKs supplies external PSKs named in the GroupSecrets.
	PSKs PSKStore
	// Validate tunes the checks of the received tree (GroupID is set by Join).
	Validate ratchettree.ValidateOptions
	// Predecessor is the group a Welcome of a reinitialized group or a
	// branch resumes (§11.2, §11.3): it supplies the resumption PSK the
	// GroupSecrets name, and the new group is checked against it.
	Predecessor *Group
	// Secrets are the Welcome's GroupSecrets for KeyPackage, already
	// opened with InitPriv by welcome.OpenSecrets; nil makes Join open
	// them. A caller that opened them to look at them passes them here so
	// that the Welcome is not decrypted twice.
	Secrets *message.GroupSecrets
}

// Join processes a Welcome (§12.4.3.1): it decrypts the GroupSecrets and
// GroupInfo, verifies the GroupInfo signature and confirmation tag,
// validates the ratchet tree against the group's tree hash, finds the
// joiner's leaf and installs the path secret, and returns the group at the
// Welcome's epoch.
func Join(s *ciphersuite.Suite, w *message.Welcome, opts *JoinOptions) (*Group, error) {
	if w == nil || opts == nil || opts.KeyPackage == nil {
		return nil, invalid("welcome, options and key package are required")
	}
	gs := opts.Secrets
	if gs == nil {
		var err error
		if gs, err = welcome.OpenSecrets(s, w, opts.KeyPackage, opts.InitPriv); err != nil {
			return nil, err
		}
	}
	var err error
	g := &Group{suite: s, sigPriv: opts.SignaturePriv, psks: opts.PSKs}
	if g.predecessor, err = predecessorFor(gs.PSKs, opts.Predecessor); err != nil {
		return nil, err
	}
	pskSecret, err := g.pskSecret(gs.PSKs)
	if err != nil {
		return nil, err
	}
	opened, err := welcome.Open(s, w, gs.JoinerSecret, pskSecret)
	if err != nil {
		return nil, err
	}
	gi := opened.GroupInfo
	tree, err := joinTree(s, gi, opts.Tree, opts.Validate)
	if err != nil {
		return nil, err
	}
	signer, err := groupInfoSigner(tree, gi)
	if err != nil {
		return nil, err
	}
	epoch, err := welcome.VerifyOpened(s, opened, signer.SignatureKey, gs.JoinerSecret, pskSecret)
	if err != nil {
		return nil, err
	}
	me, err := findLeaf(tree, &opts.KeyPackage.LeafNode)
	if err != nil {
		return nil, err
	}
	if err := supports(tree.Leaf(me), gi.GroupContext.Extensions); err != nil {
		// The joiner must support the group's extensions (§12.4.3): one it
		// does not is a feature it lacks, not a defect of the Welcome.
		return nil, fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	priv := treekem.NewPrivateState(s, me, opts.EncryptionPriv)
	if gs.PathSecret != nil {
		if err := priv.Implant(tree, treemath.LeafIndex(gi.Signer), gs.PathSecret.Secret); err != nil {
			return nil, invalid("path secret: %v", err)
		}
	}
	if err := priv.Consistent(tree); err != nil {
		return nil, invalid("joiner keys: %v", err)
	}
	interim, err := keyschedule.InterimTranscriptHash(s, gi.GroupContext.ConfirmedTranscriptHash, gi.ConfirmationTag)
	if err != nil {
		return nil, err
	}
	g.confirmationTag, g.signer = gi.ConfirmationTag, gi.Signer
	if err := g.install(gi.GroupContext, tree, priv, epoch, interim); err != nil {
		return nil, err
	}
	if r := g.predecessor; r != nil {
		if err := checkSuccessor(g, opts.Predecessor, r); err != nil {
			return nil, err
		}
		g.predecessor = nil
	}
	return g, nil
}

// joinTree imports and validates the tree of a Welcome.
func joinTree(s *ciphersuite.Suite, gi *message.GroupInfo, supplied message.RatchetTree, vo ratchettree.ValidateOptions) (*ratchettree.Tree, error) {
	rt := supplied
	if data, ok := gi.Extensions.Find(message.ExtRatchetTree); ok {
		rt = nil
		// The tree's byte slices alias the GroupInfo's, which nothing
		// changes: one copy of the tree, the decrypted one.
		if err := codec.UnmarshalView(data, &rt); err != nil {
			return nil, invalidAs(ErrTree, "ratchet_tree extension: %v", err)
		}
	}
	if rt == nil {
		return nil, invalid("no ratchet tree in the group info nor supplied")
	}
	tree, err := ratchettree.Import(s, rt)
	if err != nil {
		return nil, invalidAs(ErrTree, "%v", err)
	}
	th, err := tree.TreeHash()
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(th, gi.GroupContext.TreeHash) {
		return nil, invalidAs(ErrTree, "tree hash does not match the group context")
	}
	vo.GroupID = gi.GroupContext.GroupID
	if err := tree.Validate(&vo); err != nil {
		return nil, wrapAs(ErrTree, err)
	}
	return tree, nil
}

// findLeaf returns the index of the leaf equal to ln.
func findLeaf(tree *ratchettree.Tree, ln *message.LeafNode) (treemath.LeafIndex, error) {
	for _, l := range tree.Members() {
		if got := tree.Leaf(l); bytes.Equal(got.SignatureKey, ln.SignatureKey) && got.Equal(ln) {
			return l, nil
		}
	}
	return 0, invalid("the key package's leaf is not in the tree")
}

// groupInfoSigner returns the leaf that signed gi, which must be a member
// of tree (§12.4.3.1).
func groupInfoSigner(tree *ratchettree.Tree, gi *message.GroupInfo) (*message.LeafNode, error) {
	signer := tree.Leaf(treemath.LeafIndex(gi.Signer))
	if signer == nil {
		return nil, invalidAs(ErrSender, "group info signer %d is not a member", gi.Signer)
	}
	return signer, nil
}
