package group

import (
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/keyschedule"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
	"github.com/regroup-mls/regroup/adapters/mls/treekem"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// PublicOptions describe the start of a public view.
type PublicOptions struct {
	// Tree is used when the GroupInfo has no ratchet_tree extension.
	Tree message.RatchetTree
	// Validate tunes the checks of the received tree.
	Validate ratchettree.ValidateOptions
}

// NewPublic starts a public view of a group from its GroupInfo: the state a
// delivery service can follow without secrets. It verifies the GroupInfo's
// signature, the tree against the tree hash and the tree itself. A public
// view handles proposals and commits sent as PublicMessage; it cannot check
// membership tags or confirmation tags, decrypt anything or send, and its
// EpochAuthenticator is empty.
func NewPublic(s *ciphersuite.Suite, gi *message.GroupInfo, opts *PublicOptions) (*Group, error) {
	if gi == nil {
		return nil, invalid("group info is required")
	}
	if opts == nil {
		opts = &PublicOptions{}
	}
	tree, err := joinTree(s, gi, opts.Tree, opts.Validate)
	if err != nil {
		return nil, err
	}
	signer, err := groupInfoSigner(tree, gi)
	if err != nil {
		return nil, err
	}
	if err := gi.Verify(s, signer.SignatureKey); err != nil {
		return nil, wrapAs(ErrSignature, err)
	}
	interim, err := keyschedule.InterimTranscriptHash(s, gi.GroupContext.ConfirmedTranscriptHash, gi.ConfirmationTag)
	if err != nil {
		return nil, err
	}
	gcBytes, err := codec.Marshal(&gi.GroupContext)
	if err != nil {
		return nil, err
	}
	return &Group{suite: s, gc: gi.GroupContext, gcBytes: gcBytes, tree: tree, interim: interim,
		confirmationTag: gi.ConfirmationTag, resume: map[uint64][]byte{}}, nil
}

// Public reports whether g is a public view without secrets.
func (g *Group) Public() bool { return g.priv == nil }

// nextPublic advances a public view over a verified commit: new group
// context and transcript hashes, no key schedule.
func (g *Group) nextPublic(ac *framing.AuthenticatedContent, gc message.GroupContext, tree *ratchettree.Tree) (*Group, error) {
	cin, err := ac.ConfirmedTranscriptHashInput()
	if err != nil {
		return nil, err
	}
	gc.ConfirmedTranscriptHash = keyschedule.ConfirmedTranscriptHash(g.suite, g.interim, cin)
	interim, err := keyschedule.InterimTranscriptHash(g.suite, gc.ConfirmedTranscriptHash, ac.Auth.ConfirmationTag)
	if err != nil {
		return nil, err
	}
	gcBytes, err := codec.Marshal(&gc)
	if err != nil {
		return nil, err
	}
	return &Group{suite: g.suite, gc: gc, gcBytes: gcBytes, tree: tree, interim: interim,
		confirmationTag: ac.Auth.ConfirmationTag, resume: map[uint64][]byte{}}, nil
}

// ConfirmationTag returns the confirmation tag of the commit that started
// the current epoch, as the epoch's GroupInfo carries it.
func (g *Group) ConfirmationTag() []byte { return g.confirmationTag }

// checkPathCiphertexts checks what a public view can of the path secrets
// an UpdatePath encrypts (§7.6, §12.4.2): after tree merged the path of
// committer, every node of its filtered direct path carries one
// ciphertext per node of its copath child's resolution, the leaves the
// commit added excluded. Whether each one decrypts, and to the right
// secret, only the recipient can tell.
func checkPathCiphertexts(tree *ratchettree.Tree, committer treemath.LeafIndex, path *message.UpdatePath, added []treemath.LeafIndex) error {
	fdp := tree.FilteredDirectPath(committer)
	if len(fdp) != len(path.Nodes) {
		return fmt.Errorf("%w: %w: %d path nodes for a filtered direct path of %d", ErrInvalid, treekem.ErrPathMismatch, len(path.Nodes), len(fdp))
	}
	exclude := make(map[treemath.LeafIndex]bool, len(added))
	for _, l := range added {
		exclude[l] = true
	}
	n := tree.LeafCount()
	below := committer.Node()
	for i, x := range fdp {
		c, _ := treemath.Left(x)
		if below < x {
			c, _ = treemath.Right(x, n)
		}
		if want, got := tree.ResolutionSizeExcluding(c, exclude), len(path.Nodes[i].EncryptedPathSecret); got != want {
			return fmt.Errorf("%w: %w: path node %d: %d ciphertexts for a resolution of %d", ErrInvalid, treekem.ErrPathMismatch, x, got, want)
		}
		below = x
	}
	return nil
}

// Public returns the public view of the epoch a commit staged on a public
// view leads to.
func (p *Pending) Public() (*Group, error) {
	if p == nil || p.next == nil || !p.next.Public() {
		return nil, invalid("not a commit staged on a public view")
	}
	return p.next, nil
}

// Suite returns the group's cipher suite.
func (g *Group) Suite() *ciphersuite.Suite { return g.suite }
