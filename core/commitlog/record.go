package commitlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/ports"
)

// Merge describes a commit the client merged (FORK-001).
type Merge struct {
	GroupID          []byte
	CommitSequenceID uint64
	// Before and After are the group's state before and after the merge.
	// After.Active false marks a commit that removed this installation.
	Before, After ports.GroupView
	// Readded are installation keys the commit removed and added back in
	// the same commit (FORK-089).
	Readded [][]byte
	// ChangeClass, AddedSuperAdmins and RoleEvidence are the commit's
	// retained classification and GroupUpdated evidence (FORK-086).
	ChangeClass      ports.ChangeClass
	AddedSuperAdmins []string
	RoleEvidence     bool
}

// Failure describes a commit the client failed to process.
type Failure struct {
	GroupID          []byte
	CommitSequenceID uint64
	// View is the group's current state (unchanged by the failure).
	View ports.GroupView
	// Err is the processing error; it must wrap ports.ErrWrongEpoch,
	// ports.ErrUndecryptable or ports.ErrInvalid.
	Err error
	// Held marks a failure kept for a later attempt (PROC-012): nothing is
	// recorded for it (FORK-002).
	Held bool
}

// ResultOf returns the commit_result of the result table of section 1 for
// a processing failure: the first row whose condition holds. It returns an
// error wrapping [ErrNotRecordable] for a failure that is not a property of
// the commit.
func ResultOf(err error) (ports.CommitResult, error) {
	switch {
	case errors.Is(err, ports.ErrWrongEpoch):
		return ports.CommitResultWrongEpoch, nil
	case errors.Is(err, ports.ErrUndecryptable):
		return ports.CommitResultUndecryptable, nil
	case errors.Is(err, ports.ErrInvalid):
		return ports.CommitResultInvalid, nil
	}
	return 0, fmt.Errorf("%v: %w", err, ErrNotRecordable)
}

// Recorded says what recording a commit outcome did to the conversation's
// fork state, which is kept current in the recording transaction
// (FORK-082).
type Recorded struct {
	// ForkState is the conversation's fork state after the record.
	ForkState ports.ForkState
	// Forked is set when this record made the conversation forked: the
	// caller passes the Recorded to [Log.Notify] once its transaction
	// commits.
	Forked *ForkEvent
}

// RecordMerge records the local entry of a merged commit in tx: an applied
// entry with the epoch and authenticator after the merge (FORK-001), or a
// removal entry keeping the pre-commit epoch when the commit removed this
// installation. It also raises publisher boundaries for installations the
// commit made publishers or readded (FORK-089) and tracks this
// installation's role for publication (FORK-085), and brings the fork
// state up to date in tx (FORK-082). With the log disabled it records
// nothing.
func (l *Log) RecordMerge(ctx context.Context, tx ports.Tx, m Merge) (Recorded, error) {
	if !l.opts.Enabled {
		return Recorded{}, nil
	}
	rec, err := l.recordMerge(ctx, tx, m)
	if err != nil {
		return Recorded{}, fmt.Errorf("record merge: %w", err)
	}
	return rec, nil
}

func (l *Log) recordMerge(ctx context.Context, tx ports.Tx, m Merge) (Recorded, error) {
	g, err := tx.Groups().Get(ctx, m.GroupID)
	if err != nil {
		return Recorded{}, err
	}
	// A state whose metadata does not decode has no publishers; the entry
	// is recorded all the same (FORK-001).
	before := l.rolesOrNone(g.ConversationType, m.Before)
	after := l.rolesOrNone(g.ConversationType, m.After)
	// FORK-088 and FORK-086 run before the first subsequent applied commit.
	if err := l.ensureFloor(ctx, tx, m.GroupID, m.Before); err != nil {
		return Recorded{}, err
	}
	state, err := l.ensurePublishState(ctx, tx, g, before)
	if err != nil {
		return Recorded{}, err
	}
	removed := !m.After.Active
	e := ports.LocalCommitLogEntry{
		GroupID:                   m.GroupID,
		Membership:                g.Membership,
		CommitSequenceID:          m.CommitSequenceID,
		LastEpochAuthenticator:    bytes.Clone(m.Before.EpochAuthenticator),
		CommitResult:              ports.CommitResultApplied,
		AppliedEpochNumber:        m.After.Epoch,
		AppliedEpochAuthenticator: bytes.Clone(m.After.EpochAuthenticator),
		RemovedThisInstallation:   removed,
		ChangeClass:               m.ChangeClass,
		AddedSuperAdmins:          m.AddedSuperAdmins,
		RoleEvidence:              m.RoleEvidence,
		RecordedAt:                l.opts.Clock.Now(),
	}
	if removed {
		e.AppliedEpochNumber = m.Before.Epoch
		e.AppliedEpochAuthenticator = bytes.Clone(m.Before.EpochAuthenticator)
	}
	stored, _, err := tx.LocalCommitLog().Append(ctx, e)
	if err != nil {
		return Recorded{}, err
	}
	// FORK-089: commits that made an installation a publisher or readded it.
	was := before.publisherKeys()
	readded := map[string]bool{}
	for _, k := range m.Readded {
		readded[string(k)] = true
	}
	for k := range after.publisherKeys() {
		if !was[k] || readded[k] {
			if err := tx.ReaderAdmission().RaiseBoundary(ctx, m.GroupID, []byte(k), m.CommitSequenceID); err != nil {
				return Recorded{}, err
			}
		}
	}
	// FORK-085: the entry of the commit that made this installation a
	// publisher counts as recorded since then.
	isPub := after.selfPublisher()
	switch {
	case isPub && (!state.Publisher || readded[string(after.ownKey)]):
		state.EligibleFrom = stored.Seq
	case !isPub:
		state.EligibleFrom = stored.Seq + 1
	}
	state.Publisher = isPub
	if err := tx.PublishProgress().Put(ctx, state); err != nil {
		return Recorded{}, err
	}
	return l.recorded(ctx, tx, g, stored)
}

// recorded brings the fork state up to date after a local entry was
// recorded in tx.
func (l *Log) recorded(ctx context.Context, tx ports.Tx, g ports.Group, stored ports.LocalCommitLogEntry) (Recorded, error) {
	t, err := track(ctx, tx, g, false)
	if err != nil {
		return Recorded{}, err
	}
	if err := t.local(ctx, stored); err != nil {
		return Recorded{}, err
	}
	var r Recorded
	r.ForkState, r.Forked, err = t.finish(ctx)
	return r, err
}

// RecordFailure records the local entry of a terminal rejection
// (FORK-002): the result the table gives, with the group's current epoch
// and authenticator, and brings the fork state up to date in tx
// (FORK-082). A held failure records nothing. A WrongEpoch
// rejection for a future or unexpectedly equal epoch sets the maybe_forked
// diagnostic; one for an older epoch does not (FORK-073), and nothing here
// clears it.
func (l *Log) RecordFailure(ctx context.Context, tx ports.Tx, f Failure) (Recorded, error) {
	if f.Held {
		return Recorded{}, nil
	}
	rec, err := l.recordFailure(ctx, tx, f)
	if err != nil {
		return Recorded{}, fmt.Errorf("record failure: %w", err)
	}
	return rec, nil
}

func (l *Log) recordFailure(ctx context.Context, tx ports.Tx, f Failure) (Recorded, error) {
	result, err := ResultOf(f.Err)
	if err != nil {
		return Recorded{}, err
	}
	var we *ports.WrongEpochError
	if errors.As(f.Err, &we) && we.Relation != ports.EpochOlder {
		reason := fmt.Sprintf("commit %d: %v", f.CommitSequenceID, we)
		if err := tx.Groups().Update(ctx, f.GroupID, func(g *ports.Group) error {
			if !g.MaybeForked {
				g.MaybeForked, g.MaybeForkedReason = true, reason
			}
			return nil
		}); err != nil {
			return Recorded{}, err
		}
	}
	if !l.opts.Enabled {
		return Recorded{}, nil
	}
	g, err := tx.Groups().Get(ctx, f.GroupID)
	if err != nil {
		return Recorded{}, err
	}
	if err := l.ensureFloor(ctx, tx, f.GroupID, f.View); err != nil {
		return Recorded{}, err
	}
	e := ports.LocalCommitLogEntry{
		GroupID:                   f.GroupID,
		Membership:                g.Membership,
		CommitSequenceID:          f.CommitSequenceID,
		LastEpochAuthenticator:    bytes.Clone(f.View.EpochAuthenticator),
		CommitResult:              result,
		AppliedEpochNumber:        f.View.Epoch,
		AppliedEpochAuthenticator: bytes.Clone(f.View.EpochAuthenticator),
		RoleEvidence:              true, // a rejected commit does not change the role
		RecordedAt:                l.opts.Clock.Now(),
	}
	stored, _, err := tx.LocalCommitLog().Append(ctx, e)
	if err != nil {
		return Recorded{}, err
	}
	return l.recorded(ctx, tx, g, stored)
}

// BeginMembership starts a new membership of the group's state: at
// creation (anchor 0) or when a Welcome installs or replaces it (anchor =
// the Welcome's authenticated message_cursor). It increments the group's
// membership, resets its fork state to unknown (FORK-041), sets the legacy
// reader floor to zero (FORK-088), sets every current publisher's
// boundary to the anchor (FORK-089), and makes publication eligible from
// the next local entry. view is the installed state. Call it in the
// transaction that installs the state, after the group record exists.
func (l *Log) BeginMembership(ctx context.Context, tx ports.Tx, groupID []byte, view ports.GroupView, anchor uint64) error {
	var g ports.Group
	err := tx.Groups().Update(ctx, groupID, func(gr *ports.Group) error {
		gr.Membership++
		gr.ForkState = ports.ForkUnknown
		gr.JoinAnchor = anchor
		g = *gr
		return nil
	})
	if err != nil {
		return fmt.Errorf("begin membership: %w", err)
	}
	rs, err := l.roles(g.ConversationType, view)
	if err != nil {
		return fmt.Errorf("begin membership: %w", err)
	}
	adm := tx.ReaderAdmission()
	if err := adm.SetFloor(ctx, groupID, 0); err != nil {
		return fmt.Errorf("begin membership: %w", err)
	}
	initial := map[string]uint64{}
	for k := range rs.publisherKeys() {
		initial[k] = anchor
	}
	if err := adm.ResetBoundaries(ctx, groupID, initial); err != nil {
		return fmt.Errorf("begin membership: %w", err)
	}
	// The new membership has no local entry yet: nothing is shared, and the
	// fork state is unknown (FORK-082, FORK-041).
	if err := tx.RemoteCommitLog().PutComparison(ctx, ports.ForkComparison{GroupID: groupID, Membership: g.Membership}); err != nil {
		return fmt.Errorf("begin membership: %w", err)
	}
	next, err := nextSeq(ctx, tx, groupID)
	if err != nil {
		return fmt.Errorf("begin membership: %w", err)
	}
	state, err := tx.PublishProgress().Get(ctx, groupID)
	if err != nil && !errors.Is(err, ports.ErrNotFound) {
		return fmt.Errorf("begin membership: %w", err)
	}
	state.GroupID = groupID
	state.EligibleFrom = next
	state.LegacyRecovered = true
	state.Publisher = rs.selfPublisher()
	if err := tx.PublishProgress().Put(ctx, state); err != nil {
		return fmt.Errorf("begin membership: %w", err)
	}
	return nil
}

// nextSeq returns the Seq the group's next local entry will get.
func nextSeq(ctx context.Context, tx ports.Tx, groupID []byte) (uint64, error) {
	last, err := tx.LocalCommitLog().Last(ctx, groupID)
	if errors.Is(err, ports.ErrNotFound) {
		return 1, nil
	}
	if err != nil {
		return 0, err
	}
	return last.Seq + 1, nil
}

// ensureFloor initializes an absent legacy reader epoch floor to the
// current public group-context epoch (FORK-088).
func (l *Log) ensureFloor(ctx context.Context, tx ports.Tx, groupID []byte, view ports.GroupView) error {
	adm := tx.ReaderAdmission()
	_, ok, err := adm.Floor(ctx, groupID)
	if err != nil {
		return fmt.Errorf("reader floor: %w", err)
	}
	if ok {
		return nil
	}
	if err := adm.SetFloor(ctx, groupID, view.Epoch); err != nil {
		return fmt.Errorf("reader floor: %w", err)
	}
	return nil
}

// ensurePublishState returns the group's publication state, running the
// one-time legacy recovery of FORK-086 when it has not run: the connected
// suffix from the current state, cut at the legacy recovery boundary, is
// what stays eligible, and recorded progress is kept.
func (l *Log) ensurePublishState(ctx context.Context, tx ports.Tx, g ports.Group, cur roleState) (ports.PublishState, error) {
	state, err := tx.PublishProgress().Get(ctx, g.ID)
	if err != nil && !errors.Is(err, ports.ErrNotFound) {
		return state, fmt.Errorf("publish state: %w", err)
	}
	if err == nil && state.LegacyRecovered {
		return state, nil
	}
	state.GroupID = g.ID
	entries, err := tx.LocalCommitLog().List(ctx, g.ID, 0, 0)
	if err != nil {
		return state, fmt.Errorf("publish state: %w", err)
	}
	next := uint64(1)
	if n := len(entries); n > 0 {
		next = entries[n-1].Seq + 1
	}
	state.LegacyRecovered = true
	state.Publisher = cur.selfPublisher()
	state.EligibleFrom = next
	if state.Publisher {
		start := ConnectedSuffix(entries, cur.view.Epoch, cur.view.EpochAuthenticator)
		b := LegacyBoundary(entries, start, g.ConversationType == ports.ConversationDM, cur.ownInbox)
		if b < len(entries) {
			state.EligibleFrom = entries[b].Seq
		}
	}
	if err := tx.PublishProgress().Put(ctx, state); err != nil {
		return state, fmt.Errorf("publish state: %w", err)
	}
	return state, nil
}
