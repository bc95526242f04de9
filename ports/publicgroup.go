package ports

import (
	"context"
	"errors"
	"fmt"
)

// TopicGroupInfo carries a group's signed GroupInfo messages; identifier:
// the group id, as on [TopicGroupMessages]. A committer publishes the
// GroupInfo of the epoch its commit leads to beside the commit, and a
// group's creator publishes the first one (its registration); a delivery
// service that follows public state keeps the newest that matches it, and
// a member that must rejoin by external commit reads it with
// [Transport.QueryNewest].
const TopicGroupInfo TopicKind = 0x05

// PublicState is a group's public state as a validator without the
// epoch's secrets holds it: ratchet tree and group context.
type PublicState struct {
	// State is the engine's compact encoding of the state; a caller
	// stores it and hands it back to [PublicGroups.Apply]. Its format is
	// the engine's, versioned by the engine.
	State []byte
	// View is the state as a [GroupView]: group id, epoch, tree hash,
	// group context extensions and members. EpochAuthenticator is empty,
	// OwnLeaf is [NoLeaf] and Active is false: a public state holds no
	// member's secrets.
	View GroupView
}

// PublicCommit is a commit a [PublicGroups] validator accepted.
type PublicCommit struct {
	// Epoch is the epoch the commit was sent in (the state's before it).
	Epoch uint64
	// SenderType and Sender name the committer: for a member its leaf in
	// the commit's epoch, for an external commit the leaf the joiner
	// takes.
	SenderType SenderType
	Sender     Member
	// Proposals are the commit's proposals in the order it lists them,
	// as [Processed.Proposals] reports them.
	Proposals []Proposal
	// Next is the public state after the commit.
	Next PublicState
}

// Public refusal reasons: the check of [PublicGroups] that refused a
// message, as [PublicRefusal.Reason] names it.
const (
	// RefusedMalformed: the bytes do not decode as the expected message.
	RefusedMalformed = "malformed"
	// RefusedEpoch: the message is for another epoch than the state's
	// (the error also wraps a [*WrongEpochError]); the sender catches up
	// and retries.
	RefusedEpoch = "epoch"
	// RefusedGroup: the message names another group.
	RefusedGroup = "group"
	// RefusedSignature: a signature does not verify.
	RefusedSignature = "signature"
	// RefusedSender: the sender is not a member (or, for an external
	// commit, not a valid joiner), or the wire format or content type is
	// not one the validator accepts.
	RefusedSender = "sender"
	// RefusedProposal: a proposal, or the list of them, breaks RFC 9420
	// §12.1–12.2.
	RefusedProposal = "proposal"
	// RefusedLeafNode: a leaf node (added, updated or on the path) fails
	// RFC 9420 §7.3: its signature, capabilities, lifetime, credential or
	// uniqueness.
	RefusedLeafNode = "leaf-node"
	// RefusedParentHash: the UpdatePath does not fit the tree: its parent
	// hashes do not chain, or its nodes or their ciphertexts do not match
	// the committer's filtered direct path and its copath's resolutions.
	RefusedParentHash = "parent-hash"
	// RefusedTreeHash: a GroupInfo's tree or tree hash does not match.
	RefusedTreeHash = "tree-hash"
	// RefusedGroupInfo: a GroupInfo does not match the state's epoch or
	// group context, or its signer is not a member.
	RefusedGroupInfo = "group-info"
)

// ErrPublicRefused is wrapped by every refusal of a [PublicGroups]
// validator, as a [*PublicRefusal].
var ErrPublicRefused = errors.New("refused by public validation")

// ErrPublicState is wrapped by the error of a [PublicGroups] call given
// state bytes the validator cannot read: not a state it returned, or
// damaged in storage. It is no refusal of the message: the caller's
// stored state is at fault.
var ErrPublicState = errors.New("not a public state of this validator")

// PublicRefusal is a message a [PublicGroups] validator refused. It wraps
// [ErrPublicRefused] and [ErrInvalid], and the cause.
type PublicRefusal struct {
	// Reason is one of the Refused constants.
	Reason string
	// Err says what was wrong.
	Err error
}

func (e *PublicRefusal) Error() string {
	return fmt.Sprintf("public validation refused (%s): %v", e.Reason, e.Err)
}

// Unwrap returns the sentinels and the cause.
func (e *PublicRefusal) Unwrap() []error { return []error{ErrPublicRefused, ErrInvalid, e.Err} }

// RefusalReason returns the reason of the [*PublicRefusal] err wraps, or
// "" when it wraps none.
func RefusalReason(err error) string {
	var r *PublicRefusal
	if errors.As(err, &r) {
		return r.Reason
	}
	return ""
}

// PublicGroups is the port of a validator that follows groups without
// their secrets: the delivery service's view of every group it carries.
// It is a port of its own, not an optional interface of [MLS], because
// its user holds no installation, no [Tx] and no key: it is stateless,
// every call takes the state it works on and returns the next, and the
// caller stores them (COMP-309). Implementations are safe for concurrent
// use.
//
// It validates commits only, sent as PublicMessages, with their
// proposals inline: a PrivateMessage, an application message or a
// standalone proposal is refused with reason [RefusedSender], and a
// commit that names a proposal by reference with [RefusedProposal], since
// the validator keeps no proposals between calls.
//
// What it cannot check, for want of the epoch's secrets: membership tags,
// confirmation tags, whether the path secrets an UpdatePath encrypts to
// each member decrypt and derive the path's public keys (it checks only
// that each node carries one ciphertext per member of the resolution it
// must reach), whether a Welcome sent with the commit matches the epoch
// the commit leads to, and whether a GroupInfo's external_pub is the
// epoch's. Members check those when they process the commit.
//
// Every refusal wraps a [*PublicRefusal]. State bytes the validator
// cannot read fail with an error wrapping [ErrPublicState], not a
// refusal. A state is a pure function of the GroupInfo and the commits it
// followed: two validators given the same bytes compute the same next
// state, byte for byte.
type PublicGroups interface {
	// Open starts a public state from a GroupInfo (an MLSMessage) that
	// carries the ratchet_tree extension: it verifies the GroupInfo's
	// signature by its signer's leaf, the tree (RFC 9420 §12.4.3.1) and
	// its tree hash against the group context.
	Open(ctx context.Context, groupInfo []byte) (PublicState, error)
	// Apply validates a commit (an MLSMessage holding a PublicMessage)
	// against the state as far as public state allows — framing, the
	// signature, the sender, every proposal under RFC 9420 §12.1–12.2,
	// leaf nodes, the UpdatePath's leaf and parent hashes — and returns it
	// with the next state. A commit for another epoch than the state's
	// is refused with reason [RefusedEpoch].
	Apply(ctx context.Context, state []byte, commit []byte) (PublicCommit, error)
	// CheckGroupInfo verifies that groupInfo (an MLSMessage) describes the
	// state's epoch: signed by a member's leaf, with the state's group
	// context and confirmation tag, and, when it carries a ratchet tree,
	// the state's tree. A GroupInfo of another epoch is refused with
	// reason [RefusedGroupInfo], the error also wrapping a
	// [*WrongEpochError].
	CheckGroupInfo(ctx context.Context, state []byte, groupInfo []byte) error
}
