package group

import (
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/keyschedule"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
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
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
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
