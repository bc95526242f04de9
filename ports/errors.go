package ports

import (
	"errors"
	"fmt"
)

// Storage error classes.
var (
	// ErrNotFound reports that a row, blob or envelope the caller named does
	// not exist.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists reports an Insert ([Groups.Insert],
	// [KeyPackages.Insert]) whose key is already present, whatever the
	// contents: an identical insert is refused too (COMP-360). Writes the
	// specs make idempotent ([LocalCommitLog.Append],
	// [RemoteCommitLog.Insert], [HeldWelcomes.Put], [IdentityCache.Put],
	// [IdentityCacheBatch.PutMany], [ProcessedEnvelopes.Mark],
	// [Messages.Insert]) report a repeat with inserted = false instead,
	// never with this error.
	ErrAlreadyExists = errors.New("already exists")
	// ErrConflict reports a transaction that lost a race with a concurrent
	// one and may succeed when retried from the start.
	ErrConflict = errors.New("transaction conflict, retry")
	// ErrClosed reports a call on a store or transport after Close.
	ErrClosed = errors.New("closed")
)

// Transport error classes.
var (
	// ErrUnavailable reports that the delivery service could not be reached
	// or did not answer in time; the call may succeed later.
	ErrUnavailable = errors.New("delivery service unavailable")
	// ErrInvalidArgument reports an envelope or query the delivery service
	// refused for what it is; retrying it unchanged fails again (API-224).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrRateLimited reports a request refused by a rate limit; the call may
	// succeed after a delay.
	ErrRateLimited = errors.New("rate limited")
	// ErrUnauthenticated reports a request that needs an authenticated
	// connection and did not have one.
	ErrUnauthenticated = errors.New("unauthenticated")
)

// MLS error classes. A message that fails processing wraps exactly one of
// these, which is what the commit-log result table of fork-recovery
// section 1 is computed from.
var (
	// ErrWrongEpoch reports a message for an epoch other than the group's
	// current one. The error is a [*WrongEpochError] that says which side.
	ErrWrongEpoch = errors.New("wrong epoch")
	// ErrUndecryptable reports a message that cannot be decrypted or fails
	// MLS processing for a reason other than its epoch.
	ErrUndecryptable = errors.New("undecryptable")
	// ErrInvalid reports a message that decrypts and fails validation.
	ErrInvalid = errors.New("invalid")
	// ErrInactive reports an operation that needs the group's secrets on a
	// group this installation has been removed from.
	ErrInactive = errors.New("group state is inactive")
	// ErrGroupNotFound reports an operation on a group the engine holds no
	// state for.
	ErrGroupNotFound = errors.New("group not found")
	// ErrUnsupported reports input that uses an MLS version, cipher suite
	// or extension this installation does not advertise: a Welcome so
	// refused can be held (JOIN-087) rather than rejected.
	ErrUnsupported = errors.New("unsupported")
)

// ProcessError is a failure of [MLS.Process] for a message that names an
// epoch. It unwraps to the failure, which wraps the class.
type ProcessError struct {
	// MessageEpoch is the epoch the message names.
	MessageEpoch uint64
	// Err is the failure.
	Err error
	// Authenticated reports that the engine verified the message as its
	// sender's (signature and membership tag, or decryption) before it
	// refused it: the refusal is of a member's message, not of bytes the
	// delivery service placed. An engine that cannot tell leaves it
	// false; the client then waits for a later authenticated envelope
	// before it records the refusal (COMP-240).
	Authenticated bool
}

// Authenticated reports whether err is a [*ProcessError] of a message the
// engine authenticated before it refused it.
func Authenticated(err error) bool {
	var pe *ProcessError
	return errors.As(err, &pe) && pe.Authenticated
}

func (e *ProcessError) Error() string { return e.Err.Error() }

// Unwrap returns the failure.
func (e *ProcessError) Unwrap() error { return e.Err }

// EpochRelation says where a message's epoch lies against the group's
// current epoch.
type EpochRelation int

const (
	// EpochOlder is a message for an epoch before the current one.
	EpochOlder EpochRelation = iota + 1
	// EpochEqual is a message of the current epoch that this installation
	// cannot process in it: its own commit, read back without the pending
	// commit it came from (see [MLS]). FORK-073 treats it as a divergence
	// signal.
	EpochEqual
	// EpochFuture is a message for an epoch after the current one.
	EpochFuture
)

// String returns "older", "equal" or "future".
func (r EpochRelation) String() string {
	switch r {
	case EpochOlder:
		return "older"
	case EpochEqual:
		return "equal"
	case EpochFuture:
		return "future"
	}
	return fmt.Sprintf("EpochRelation(%d)", int(r))
}

// WrongEpochError is the error for a message whose epoch is not the group's
// current epoch. It unwraps to [ErrWrongEpoch].
type WrongEpochError struct {
	Relation EpochRelation
	// MessageEpoch is the epoch the message names.
	MessageEpoch uint64
	// GroupEpoch is the group's current epoch.
	GroupEpoch uint64
}

func (e *WrongEpochError) Error() string {
	return fmt.Sprintf("wrong epoch: message epoch %d is %s than group epoch %d",
		e.MessageEpoch, e.Relation, e.GroupEpoch)
}

// Unwrap returns [ErrWrongEpoch].
func (e *WrongEpochError) Unwrap() error { return ErrWrongEpoch }
