package client

import (
	"context"

	"github.com/regroup-mls/regroup/ports"
)

// ForkStatus is what an app reads about a conversation's fork state
// (FORK-072).
type ForkStatus struct {
	State ports.ForkState
	// MaybeForked is the epoch-mismatch diagnostic of FORK-073, with the
	// reason it was set.
	MaybeForked       bool
	MaybeForkedReason string
}

// ForkState returns the conversation's fork state and maybe_forked
// diagnostic. While the commit log is disabled it reads unknown
// (FORK-004).
func (cv *Conversation) ForkState(ctx context.Context) (ForkStatus, error) {
	st, err := cv.c.log.ForkState(ctx, cv.id)
	if err != nil {
		return ForkStatus{}, err
	}
	mf, reason, err := cv.c.log.MaybeForked(ctx, cv.id)
	if err != nil {
		return ForkStatus{}, err
	}
	return ForkStatus{State: st, MaybeForked: mf, MaybeForkedReason: reason}, nil
}

// LocalEntries returns the conversation's local commit-log entries in
// recording order (FORK-072).
func (cv *Conversation) LocalEntries(ctx context.Context) ([]ports.LocalCommitLogEntry, error) {
	return cv.c.log.LocalEntries(ctx, cv.id)
}

// RemoteEntries returns the conversation's accepted remote entries in
// topic order (FORK-072).
func (cv *Conversation) RemoteEntries(ctx context.Context) ([]ports.RemoteCommitLogEntry, error) {
	return cv.c.log.RemoteEntries(ctx, cv.id)
}

// SyncCommitLog publishes this installation's entries and reads the
// conversation's commit log once, now.
func (cv *Conversation) SyncCommitLog(ctx context.Context) (ports.ForkState, error) {
	rep, err := cv.c.log.Sync(ctx, cv.id)
	return rep.Read.ForkState, err
}
