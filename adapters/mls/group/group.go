// Package group holds the state of one member in one epoch of an MLS group
// (RFC 9420 §8, §12) and moves it forward: joining from a Welcome
// ([Join]), caching proposals ([Group.HandleProposal]) and processing
// another member's commit ([Group.HandleCommit]) with the proposal order of
// §12.3, the UpdatePath of §7.5 and the key schedule of §8.
//
// # Scope
//
// A Group creates groups ([Create]), proposals, commits with or without a
// path and their Welcomes ([Group.Commit], merged with
// [Group.MergePending]), joins by external commit ([JoinExternal]),
// protects application data, and stages and merges the messages of other
// members. [NewPublic] gives a delivery service a view without secrets that
// follows PublicMessage commits. Proposals from outside the group come
// from the senders of the external_senders extension ([ExternalProposal])
// and from joiners signing their own Add ([NewMemberProposal]); external
// commits may inject PSKs. A ReInit commit ends the group
// ([Group.ReInit]) and [Group.Reinitialize] creates its successor;
// [Group.Branch] creates a subgroup; both are joined with
// JoinOptions.Predecessor. The draft SelfRemove proposal
// ([Group.ProposeSelfRemove]) works in groups whose members all support
// it.
//
// # State
//
// [Group.Marshal] and [Load] keep a group in one blob (state version 2);
// [Group.MarshalSplit] and [LoadSplit] in parts (version 3): a head, and
// the ratchet tree's nodes in blocks, of which a later split holds only
// those that changed. A pending commit is kept whole ([Pending.Marshal])
// or as its changes to the stored group it was built on
// ([Pending.MarshalChanges]). [Group.Clone] gives an independent copy.
//
// # Errors
//
// [ErrWrongEpoch] (as an [*EpochError]) and [ErrWrongGroup] classify
// messages that belong elsewhere; [ErrUndecryptable] a PrivateMessage this
// epoch's keys cannot open; [ErrInvalid] wraps every rule a message breaks; [ErrRemoved]
// reports a commit that removed this member; [ErrUnknownPSK] a PSK the
// caller does not hold; [ErrOwnCommit] a commit of this member's own, which
// it merges from its pending state; [ErrUnsupported] a feature this
// package, or a joiner's leaf, lacks.
package group

import (
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/keyschedule"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/adapters/mls/ratchettree"
	"github.com/regroup-mls/regroup/adapters/mls/secrettree"
	"github.com/regroup-mls/regroup/adapters/mls/treekem"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// Sentinel errors.
var (
	// ErrWrongEpoch means a message is for another epoch.
	ErrWrongEpoch = errors.New("group: wrong epoch")
	// ErrWrongGroup means a message is for another group.
	ErrWrongGroup = errors.New("group: wrong group")
	// ErrInvalid means a message or Welcome breaks a rule of RFC 9420.
	ErrInvalid = errors.New("group: invalid")
	// ErrRemoved means the commit removed this member from the group.
	ErrRemoved = errors.New("group: removed from the group")
	// ErrUnknownPSK means a PSK the commit or Welcome needs is not available.
	ErrUnknownPSK = errors.New("group: unknown pre-shared key")
	// ErrUnsupported means the message uses a feature this package lacks.
	ErrUnsupported = errors.New("group: unsupported")
	// ErrUndecryptable means a PrivateMessage could not be decrypted with
	// this epoch's keys.
	ErrUndecryptable = errors.New("group: undecryptable")
	// ErrOwnCommit means a commit of the current epoch signed by this
	// member: one it can apply only from the pending state it built it
	// with ([Group.MergePending]), never by processing it.
	ErrOwnCommit = errors.New("group: this member's own commit")
	// ErrReInitialized means the group's last commit carried a ReInit
	// (§11.2): the group has ended and is only the predecessor of its
	// successor.
	ErrReInitialized = errors.New("group: reinitialized")
)

// EpochError is the error for a message of another epoch; it unwraps to
// ErrWrongEpoch.
type EpochError struct {
	MessageEpoch, GroupEpoch uint64
}

func (e *EpochError) Error() string {
	rel := "older"
	if e.MessageEpoch > e.GroupEpoch {
		rel = "newer"
	}
	return fmt.Sprintf("group: wrong epoch: message epoch %d is %s than group epoch %d", e.MessageEpoch, rel, e.GroupEpoch)
}

// Unwrap returns ErrWrongEpoch.
func (e *EpochError) Unwrap() error { return ErrWrongEpoch }

// PSKStore supplies pre-shared keys.
type PSKStore interface {
	// ExternalPSK returns the external PSK with the given psk_id.
	ExternalPSK(id []byte) ([]byte, bool)
}

// MapPSKStore is a PSKStore over a map from psk_id to PSK.
type MapPSKStore map[string][]byte

// ExternalPSK returns m[id].
func (m MapPSKStore) ExternalPSK(id []byte) ([]byte, bool) {
	v, ok := m[string(id)]
	return v, ok
}

// maxResumptionEpochs bounds how many past resumption PSKs a group keeps.
const maxResumptionEpochs = 16

// Group is one member's state of one epoch. It is not safe for concurrent use.
type Group struct {
	suite     *ciphersuite.Suite
	gc        message.GroupContext
	gcBytes   []byte
	tree      *ratchettree.Tree
	priv      *treekem.PrivateState
	epoch     *keyschedule.Epoch
	interim   []byte
	secrets   *secrettree.Tree
	sigPriv   []byte
	psks      PSKStore
	proposals []cached
	resume    map[uint64][]byte
	// confirmationTag is the tag of the commit that started this epoch.
	confirmationTag []byte
	// pskList names the PSKs of the commit that started this epoch, for its Welcome.
	pskList []message.PreSharedKeyID
	// past holds the receive keys of retained past epochs, oldest first.
	past    []view
	maxPast int
	// signer is the GroupInfo signer of the Welcome this member joined by.
	signer uint32
	// leafKeys holds the private keys of this member's proposed updates,
	// by public key, until a commit applies one.
	leafKeys map[string][]byte
	// reinit is the ReInit of the commit that started this epoch: the
	// group has ended (§11.2). Kept in memory only (COMP-302).
	reinit *message.ReInit
	// predecessor is the group a reinitialized or branched group resumes,
	// for the resumption PSK of its first commit or Welcome (§11.2, §11.3).
	predecessor *resumption
}

type cached struct {
	ref      []byte
	proposal *message.Proposal
	sender   framing.Sender
}

// GroupContext returns the current group context.
func (g *Group) GroupContext() message.GroupContext { return g.gc }

// Epoch returns the current epoch number.
func (g *Group) Epoch() uint64 { return g.gc.Epoch }

// EpochAuthenticator returns the current epoch_authenticator (§8.7); it is
// empty for a public view.
func (g *Group) EpochAuthenticator() []byte {
	if g.epoch == nil {
		return nil
	}
	return g.epoch.EpochAuthenticator
}

// Leaf returns this member's leaf index (0 for a public view).
func (g *Group) Leaf() treemath.LeafIndex {
	if g.priv == nil {
		return 0
	}
	return g.priv.Leaf()
}

// WelcomeSigner returns the leaf that signed the GroupInfo of the Welcome
// this member joined by (JOIN-025); 0 for a creator.
func (g *Group) WelcomeSigner() uint32 { return g.signer }

// Active reports whether this member holds the group's secrets: false for
// a public view and after a commit that removed this member.
func (g *Group) Active() bool { return g.priv != nil }

// errPublic is returned by operations that need secrets on a public view.
var errPublic = fmt.Errorf("%w: a public view holds no secrets", ErrUnsupported)

// LeafNode returns the leaf at l in the current tree, nil when blank or
// out of range; the caller must not modify it.
func (g *Group) LeafNode(l treemath.LeafIndex) *message.LeafNode { return g.tree.Leaf(l) }

// Tree returns a copy of the current ratchet tree.
func (g *Group) Tree() *ratchettree.Tree { return g.tree.Clone() }

// Members returns the indices of the non-blank leaves of the current tree,
// in order; [Group.LeafNode] reads them without copying the tree.
func (g *Group) Members() []treemath.LeafIndex { return g.tree.Members() }

// Export is the MLS exporter of the current epoch (§8.5).
func (g *Group) Export(label string, context []byte, length int) ([]byte, error) {
	if g.Public() {
		return nil, errPublic
	}
	return keyschedule.Export(g.suite, g.epoch.ExporterSecret, label, context, length)
}

// ResumptionPSK returns the resumption_psk of a recent epoch of this
// group (§8.6): the current one or one of the last few this member saw.
func (g *Group) ResumptionPSK(epoch uint64) ([]byte, bool) {
	r, ok := g.resume[epoch]
	return r, ok
}

// install makes the given epoch current.
func (g *Group) install(gc message.GroupContext, tree *ratchettree.Tree, priv *treekem.PrivateState,
	epoch *keyschedule.Epoch, interim []byte) error {
	gcBytes, err := codec.Marshal(&gc)
	if err != nil {
		return err
	}
	st, err := secrettree.New(g.suite, epoch.EncryptionSecret, uint32(tree.LeafCount()), nil)
	if err != nil {
		return err
	}
	g.gc, g.gcBytes, g.tree, g.priv, g.epoch, g.interim, g.secrets = gc, gcBytes, tree, priv, epoch, interim, st
	g.proposals = nil
	if g.resume == nil {
		g.resume = map[uint64][]byte{}
	}
	g.resume[gc.Epoch] = epoch.ResumptionPSK
	delete(g.resume, gc.Epoch-maxResumptionEpochs)
	return nil
}

// SetPastEpochs sets how many past epochs keep their keys for late
// application messages (0, the default, keeps none); older ones are erased.
func (g *Group) SetPastEpochs(n int) {
	g.maxPast = max(n, 0)
	g.trimPast()
}

func (g *Group) trimPast() {
	for len(g.past) > g.maxPast {
		g.past = g.past[1:]
	}
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
