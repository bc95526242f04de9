package ports

import "context"

// AssociationState is an inbox's installations as of one identity sequence
// id: the fold of the inbox's identity updates up to and including it.
type AssociationState struct {
	InboxID string
	// SequenceID is the sequence id on the inbox's identity-update topic the
	// state was folded up to.
	SequenceID uint64
	// InstallationKeys are the 32-byte Ed25519 installation keys the inbox
	// associates at SequenceID, in the order they were added.
	InstallationKeys [][]byte
}

// Identity resolves inbox association state (JOIN-051 to JOIN-059,
// JOIN-095).
type Identity interface {
	// AssociationState returns the inbox's state at exactly sequenceID,
	// fetching the inbox's identity updates through sequenceID when they are
	// not held (JOIN-051). It returns an error wrapping [ErrNotFound] when,
	// after fetching, the backend holds no update at sequenceID (JOIN-059),
	// and one wrapping [ErrUnavailable] when the fetch failed and may succeed
	// later. It never answers from partial state.
	AssociationState(ctx context.Context, inboxID string, sequenceID uint64) (AssociationState, error)
	// Newest returns the newest association state of the inbox that is held
	// locally, without fetching (JOIN-095). It returns an error wrapping
	// [ErrNotFound] when none is held.
	Newest(ctx context.Context, inboxID string) (AssociationState, error)
}

// IdentityRequest names one association state to resolve: an inbox at an
// exact identity sequence id.
type IdentityRequest struct {
	InboxID    string
	SequenceID uint64
}

// IdentityResult is the answer to one [IdentityRequest]: the state, or
// the error [Identity.AssociationState] would have returned for it.
type IdentityResult struct {
	State AssociationState
	Err   error
}

// NewestIdentity is an optional ability of an [Identity], detected with a
// type assertion: resolving an inbox's newest state from the newest
// sequence id a delivery service reports for its topic (API-244) without
// trusting that id, which no signature covers.
type NewestIdentity interface {
	// NewestUpTo fetches the inbox's identity updates after the highest
	// held, reading its topic no further than reported, and returns the
	// state at the highest verified update whose sequence id is at most
	// reported; that update's id is the state's SequenceID. It returns an
	// error wrapping [ErrNotFound] when no such update is held, and the
	// fetch's error (wrapping [ErrUnavailable]) when the fetch failed.
	NewestUpTo(ctx context.Context, inboxID string, reported uint64) (AssociationState, error)
}

// BatchIdentity is an optional ability of an [Identity], detected with a
// type assertion: resolving many association states in one call.
type BatchIdentity interface {
	// AssociationStates resolves every request exactly as
	// [Identity.AssociationState] would — the same states, the same
	// errors (wrapping [ErrNotFound] or [ErrUnavailable]) and the same
	// fetch-and-retry window for each request, measured from the call — and
	// returns one result per request, in request order. It never answers a
	// request from partial state. It returns an error, and no results, only
	// when the whole call failed (ctx ended, or the local store failed).
	AssociationStates(ctx context.Context, reqs []IdentityRequest) ([]IdentityResult, error)
}
