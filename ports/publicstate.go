package ports

import (
	"context"
	"errors"
	"fmt"
)

// ErrEpochConflict reports a commit the delivery service refused because
// it is for another epoch than the group's current one on the service:
// another member's commit won that epoch (or the sender is ahead). The
// sender catches up with the group's topic and, if its change still
// applies, builds the commit again. It is a transport error class of its
// own, never wrapped together with [ErrInvalidArgument]: retrying the
// same commit fails again, but the change it carries is not refused.
var ErrEpochConflict = errors.New("commit is not for the group's current epoch: catch up and retry")

// ErrStateMoved reports a [PublicStateStore.AppendWithState] whose
// expected public state was no longer the stored one: a concurrent append
// (of this process or of another sharing the database) advanced it first.
// Nothing was stored; the caller reads the state again and re-validates.
// It wraps [ErrConflict].
var ErrStateMoved = fmt.Errorf("public state moved: %w", ErrConflict)

// StoredPublicState is the public state a delivery service keeps for one
// group: where [PublicGroups] left it after the group's last accepted
// commit or registration.
type StoredPublicState struct {
	// GroupID is the group's id, the identifier of its group-message
	// topic.
	GroupID []byte
	// Epoch is the state's epoch.
	Epoch uint64
	// State is the validator's encoding ([PublicState.State]).
	State []byte
	// CommitSeq is the sequence id of the commit that led to the state,
	// 0 for a registered state no stored commit led to.
	CommitSeq uint64
	// CommitDigest is the SHA-256 of the MLSMessage of that commit (the
	// envelope's DedupKey), nil when CommitSeq is 0: a sender that
	// publishes the same commit again is answered with CommitSeq.
	CommitDigest []byte
	// GroupInfoSeq is the sequence id of the newest accepted GroupInfo on
	// the group's [TopicGroupInfo] topic, 0 when none is stored.
	GroupInfoSeq uint64
}

// PublicStateAdvance is one group's state change an
// [PublicStateStore.AppendWithState] makes together with its envelopes.
type PublicStateAdvance struct {
	// GroupID names the group.
	GroupID []byte
	// Register makes the advance the group's first state: the store must
	// hold none for it. Otherwise the stored state must be at epoch From
	// with the CommitSeq FromCommitSeq.
	Register      bool
	From          uint64
	FromCommitSeq uint64
	// Epoch and State are the new state; State nil keeps the stored
	// state (a GroupInfo of the current epoch only).
	Epoch uint64
	State []byte
	// Commit is the index in the batch of the commit envelope that leads
	// to the new state (its DedupKey is the digest kept), or -1.
	Commit int
	// GroupInfo is the index in the batch of the GroupInfo envelope that
	// becomes the group's newest, or -1. The store deletes the older
	// envelopes of its topic in the same transaction (a pending
	// GroupInfo excepted).
	GroupInfo int
	// The fields below need an [AcceptanceStore].
	//
	// Pending, when set, stores the advance's commit as the group's
	// pending commit instead of advancing the current state: State and
	// Epoch go beside the current state, the Commit and GroupInfo
	// envelopes are stored marked pending, and no older GroupInfo is
	// deleted. The store must hold no pending commit of the group.
	Pending *PendingAdvance
	// Supersede, when not 0, is the sequence id of the group's pending
	// commit that this (one-phase) advance discards: the store must hold
	// exactly that pending commit; it deletes it and its GroupInfo and
	// records it superseded at SupersededNS. Any other advance of the
	// state fails with [ErrStateMoved] while a commit is pending.
	Supersede    uint64
	SupersededNS int64
	// Unquarantine lists inboxes whose quarantine in the group ends with
	// this advance (the new state has no leaf of theirs).
	Unquarantine []string
	// Unblock lists installations whose block in the group ends with
	// it (the commit took their leaf out); a store that is no
	// [BlockStore] ignores it.
	Unblock [][]byte
}

// PendingAdvance describes a commit a [PublicStateAdvance] stores as
// its group's pending commit.
type PendingAdvance struct {
	// Committer is the committer's inbox.
	Committer string
	// External marks an external commit (a resync or recovery join).
	External bool
	// CreatedNS is when the service accepted it, nanoseconds since the
	// Unix epoch.
	CreatedNS int64
}

// PublicStateStore is an optional interface of an [EnvelopeStore] that
// also keeps every followed group's public state (commit acceptance). It
// is an optional interface of the envelope store, not a port of its own,
// because its one write must commit in the same database transaction as
// the envelopes it concerns: a process killed at any instant leaves
// either the commit stored and the state advanced, or neither, so the
// state never disagrees with the stored envelopes. Implementations are
// safe for concurrent use, also by several processes sharing a database.
type PublicStateStore interface {
	EnvelopeStore
	// PublicState returns the group's stored state, or an error wrapping
	// [ErrNotFound] when the store holds none.
	PublicState(ctx context.Context, groupID []byte) (StoredPublicState, error)
	// AppendWithState is [EnvelopeStore.Append] that also applies every
	// advance, in ONE transaction: either the envelopes are stored and
	// every state advanced, or nothing changed. An advance whose
	// expectation (Register, or From and FromCommitSeq) does not hold when
	// the transaction locks the group's state fails the whole call with an
	// error wrapping [ErrStateMoved]; so of two commits of one epoch,
	// appended at once through one process or several, exactly one is
	// stored. Advances name distinct groups.
	AppendWithState(ctx context.Context, envs []NewStoredEnvelope, advances []PublicStateAdvance) ([]uint64, error)
}

// PublicStateViewer is an optional interface of a [PublicGroups]
// validator: it reads a stored state back as a [GroupView] (as
// [PublicState.View] reports it), which a delivery service needs to run
// the role policy on the state before a commit when it did not compute
// that state itself since it started.
type PublicStateViewer interface {
	// View returns the view of state, an encoding [PublicGroups] returned.
	View(ctx context.Context, state []byte) (GroupView, error)
}
