package commitlog

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// PublishReport says what one [Log.Publish] pass did.
type PublishReport struct {
	// Eligible reports that the conversation was publishable: log enabled,
	// consent allowed, and this installation a publisher.
	Eligible bool
	// Published is how many entries the backend confirmed in this pass.
	Published int
	// ConfirmedThrough is the local Seq publication has reached.
	ConfirmedThrough uint64
}

// Publish publishes the conversation's eligible local entries in
// ascending order (FORK-085, FORK-086, FORK-021). Progress is stored after
// each confirmed page, so a restart resumes at the first unconfirmed entry;
// when the backend fails or does not confirm an entry with a sequence id
// greater than 0, the pass stops there and returns an error wrapping
// [ErrPublish], and the next pass publishes that entry again (its bytes are
// identical) before anything later.
func (l *Log) Publish(ctx context.Context, groupID []byte) (PublishReport, error) {
	var rep PublishReport
	if !l.opts.Enabled {
		return rep, nil
	}
	defer l.lock(groupID)()
	keys, pending, state, err := l.publishable(ctx, groupID)
	if err != nil || pending == nil {
		rep.ConfirmedThrough = state.ConfirmedThrough
		return rep, err
	}
	rep.Eligible = true
	rep.ConfirmedThrough = state.ConfirmedThrough
	for len(pending) > 0 {
		n := min(len(pending), l.opts.PublishBatch)
		page := pending[:n]
		envs := make([]*backendpb.ClientEnvelope, len(page))
		for i, e := range page {
			sealed, err := Seal(keys, plaintextOf(e), l.opts.InstallationKey)
			if err != nil {
				return rep, fmt.Errorf("publish: %w", err)
			}
			envs[i] = Envelope(keys, sealed)
		}
		seqs, pubErr := l.opts.Transport.Publish(ctx, envs)
		confirmed := 0
		if pubErr == nil {
			for confirmed < len(page) && confirmed < len(seqs) && seqs[confirmed] > 0 {
				confirmed++
			}
		}
		if confirmed > 0 {
			through := page[confirmed-1].Seq
			if err := l.confirm(ctx, groupID, through); err != nil {
				return rep, err
			}
			rep.Published += confirmed
			rep.ConfirmedThrough = through
		}
		if pubErr != nil {
			return rep, fmt.Errorf("publish entry %d: %w: %w", page[0].CommitSequenceID, ErrPublish, pubErr)
		}
		if confirmed < len(page) {
			return rep, fmt.Errorf("publish entry %d: no sequence id confirmed: %w", page[confirmed].CommitSequenceID, ErrPublish)
		}
		pending = pending[n:]
	}
	return rep, nil
}

// publishable returns the conversation's keys and the local entries to
// publish, in recording order, or nil entries when it is not eligible.
func (l *Log) publishable(ctx context.Context, groupID []byte) (Keys, []ports.LocalCommitLogEntry, ports.PublishState, error) {
	var (
		keys    Keys
		pending []ports.LocalCommitLogEntry
		state   ports.PublishState
	)
	err := l.opts.Store.Tx(ctx, func(tx ports.Tx) error {
		pending = nil
		g, err := tx.Groups().Get(ctx, groupID)
		if err != nil {
			return err
		}
		if keys, err = keysFor(g); err != nil {
			return err
		}
		if g.Consent != ports.ConsentAllowed {
			return nil
		}
		view, err := l.opts.Views.Group(ctx, tx, groupID)
		if err != nil {
			return err
		}
		cur, err := l.roles(g.ConversationType, view)
		if err != nil {
			return err
		}
		if state, err = l.ensurePublishState(ctx, tx, g, cur); err != nil {
			return err
		}
		if cur.selfPublisher() != state.Publisher {
			// A role change no recorded commit explains (for example one
			// merged while the log was disabled): eligibility starts now.
			next, err := nextSeq(ctx, tx, groupID)
			if err != nil {
				return err
			}
			state.Publisher, state.EligibleFrom = cur.selfPublisher(), next
			if err := tx.PublishProgress().Put(ctx, state); err != nil {
				return err
			}
		}
		if !state.Publisher {
			return nil
		}
		if l.opts.InstallationKey == nil || !bytes.Equal(cur.ownKey, l.opts.InstallationKey.Public().(ed25519.PublicKey)) {
			return fmt.Errorf("publish: %w", ErrBadKey)
		}
		after := max(state.ConfirmedThrough, state.EligibleFrom-min(state.EligibleFrom, 1))
		entries, err := tx.LocalCommitLog().List(ctx, groupID, after, 0)
		if err != nil {
			return err
		}
		pending = []ports.LocalCommitLogEntry{}
		for _, e := range entries {
			if e.RemovedThisInstallation || (!e.Legacy && e.Membership != g.Membership) {
				continue // removal entries and earlier memberships are never published
			}
			pending = append(pending, e)
		}
		return nil
	})
	if errors.Is(err, ErrNoCommitLog) || errors.Is(err, ErrBadKey) {
		return keys, nil, state, err
	}
	if err != nil {
		return keys, nil, state, fmt.Errorf("publish: %w", err)
	}
	return keys, pending, state, nil
}

// confirm raises the stored publication progress to through.
func (l *Log) confirm(ctx context.Context, groupID []byte, through uint64) error {
	err := l.opts.Store.Tx(ctx, func(tx ports.Tx) error {
		s, err := tx.PublishProgress().Get(ctx, groupID)
		if err != nil {
			return err
		}
		if through > s.ConfirmedThrough {
			s.ConfirmedThrough = through
		}
		return tx.PublishProgress().Put(ctx, s)
	})
	if err != nil {
		return fmt.Errorf("publish progress: %w", err)
	}
	return nil
}

// plaintextOf returns the PlaintextCommitLogEntry of a local entry, author
// fields unset.
func plaintextOf(e ports.LocalCommitLogEntry) *contentspb.PlaintextCommitLogEntry {
	return &contentspb.PlaintextCommitLogEntry{
		GroupId:                   e.GroupID,
		CommitSequenceId:          e.CommitSequenceID,
		LastEpochAuthenticator:    e.LastEpochAuthenticator,
		CommitResult:              contentspb.CommitResult(e.CommitResult),
		AppliedEpochNumber:        e.AppliedEpochNumber,
		AppliedEpochAuthenticator: e.AppliedEpochAuthenticator,
	}
}
