package commitlog

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// ReadReport says what one [Log.Read] pass did.
type ReadReport struct {
	// Evaluated counts envelopes evaluated in this pass (accepted or
	// discarded).
	Evaluated int
	// Accepted counts envelopes kept as accepted entries.
	Accepted int
	// Held is non-zero when evaluation stopped at an entry naming a commit
	// the reader has not processed yet (FORK-087): the commit sequence id
	// it waits for.
	Held uint64
	// ForkState is the conversation's fork state after the pass.
	ForkState ports.ForkState
}

// Sync publishes and then reads one conversation.
func (l *Log) Sync(ctx context.Context, groupID []byte) (ReadReport, error) {
	if _, err := l.Publish(ctx, groupID); err != nil && !errors.Is(err, ErrNoCommitLog) {
		return ReadReport{}, err
	}
	return l.Read(ctx, groupID)
}

// Read reads the conversation's commit-log topic from the stored read
// position and evaluates each new envelope once, in sequence id order
// (FORK-030): verification (FORK-077), admission (FORK-087, FORK-088) and
// the chain (FORK-083, FORK-089). A discarded envelope is counted under its
// [Reason] and never evaluated again. Evaluation stops, without moving the
// read position past it, at an entry naming a commit the reader has not
// processed while its state is active. The fork state is then recomputed
// (FORK-082) unless it is forked (FORK-041). A conversation whose log is
// not read (consent not allowed, one-shot, sync or restored groups, log
// disabled) is left as it is.
func (l *Log) Read(ctx context.Context, groupID []byte) (ReadReport, error) {
	var rep ReadReport
	if !l.opts.Enabled {
		return rep, nil
	}
	defer l.lock(groupID)()
	for {
		g, keys, pos, ok, err := l.readStart(ctx, groupID)
		if err != nil || !ok {
			rep.ForkState = g.ForkState
			return rep, err
		}
		envs, err := l.opts.Transport.Query(ctx, keys.Topic, pos, l.opts.PageSize)
		if err != nil {
			return rep, fmt.Errorf("read commit log: %w", err)
		}
		page, err := l.evaluate(ctx, g, keys, envs)
		if err != nil {
			return rep, err
		}
		rep.Evaluated += page.Evaluated
		rep.Accepted += page.Accepted
		rep.Held = page.Held
		rep.ForkState = page.ForkState
		if len(envs) == 0 || page.Held != 0 || page.Evaluated == 0 {
			return rep, nil
		}
	}
}

// readStart loads what a read pass needs and initializes the legacy reader
// floor (FORK-088). ok is false when the conversation's log is not read.
func (l *Log) readStart(ctx context.Context, groupID []byte) (g ports.Group, keys Keys, pos uint64, ok bool, err error) {
	err = l.opts.Store.Tx(ctx, func(tx ports.Tx) error {
		ok = false
		if g, err = tx.Groups().Get(ctx, groupID); err != nil {
			return err
		}
		if g.Consent != ports.ConsentAllowed {
			return nil
		}
		if keys, err = keysFor(g); err != nil {
			if errors.Is(err, ErrNoCommitLog) {
				err = nil
			}
			return err
		}
		view, err := l.opts.Views.Group(ctx, tx, groupID)
		if err != nil {
			return err
		}
		if err := l.ensureFloor(ctx, tx, groupID, view); err != nil {
			return err
		}
		if pos, err = tx.RemoteCommitLog().ReadPosition(ctx, groupID); err != nil {
			return err
		}
		ok = true
		return nil
	})
	if err != nil {
		err = fmt.Errorf("read commit log: %w", err)
	}
	return g, keys, pos, ok, err
}

// verifyPage sorts a page by sequence id, runs the non-signature checks of
// FORK-077 and verifies every signature of the page in one call to the
// verifier. It returns each envelope with its verdict (nil when it passed).
func verifyPage(v Verifier, keys Keys, groupID []byte, envs []*backendpb.OriginatorEnvelope) ([]*opened, []*RejectError) {
	envs = slices.Clone(envs)
	slices.SortStableFunc(envs, func(a, b *backendpb.OriginatorEnvelope) int {
		return cmp.Compare(a.GetSequenceId(), b.GetSequenceId())
	})
	prepared := make([]*opened, len(envs))
	var checks []SignatureCheck
	for i, env := range envs {
		prepared[i] = prepare(keys, groupID, env)
		checks = append(checks, prepared[i].checks...)
	}
	results := v.VerifyAll(checks)
	verdicts := make([]*RejectError, len(envs))
	at := 0
	var ok [2]bool
	for i, o := range prepared {
		n := len(o.checks)
		ok = [2]bool{}
		copy(ok[:], results[at:at+n])
		at += n
		verdicts[i] = o.verdict(ok[:])
	}
	return prepared, verdicts
}

// admission is the reader's state for FORK-087, FORK-088 and FORK-083.
type admission struct {
	groupID    []byte
	floor      uint64
	active     bool
	cursor     uint64 // last processed group-message envelope
	roles      roleState
	boundaries map[string]uint64
	last       *ports.RemoteCommitLogEntry
	pos        uint64 // read position
	now        time.Time
}

// admitResult is what admitting one page produced.
type admitResult struct {
	accepted  []ports.RemoteCommitLogEntry
	counts    map[Reason]uint64
	evaluated int
	held      uint64
}

// admit evaluates verified envelopes in order: replays are skipped, failed
// verification and the floor discard, an active reader holds at an entry
// naming a commit it has not processed, and the author and chain checks
// decide acceptance.
func (a *admission) admit(prepared []*opened, verdicts []*RejectError) admitResult {
	r := admitResult{counts: map[Reason]uint64{}}
	for i, o := range prepared {
		if o.seq <= a.pos {
			r.counts[ReasonReplay]++
			continue
		}
		if v := verdicts[i]; v != nil {
			r.counts[v.Reason]++
			a.pos, r.evaluated = o.seq, r.evaluated+1
			continue
		}
		e := o.entry
		if e.GetAppliedEpochNumber() < a.floor {
			r.counts[ReasonBelowFloor]++
			a.pos, r.evaluated = o.seq, r.evaluated+1
			continue
		}
		if a.active && a.cursor < e.GetCommitSequenceId() {
			r.held = e.GetCommitSequenceId()
			break
		}
		a.pos, r.evaluated = o.seq, r.evaluated+1
		if !a.roles.isPublisherKey(e.GetAuthorInstallationKey()) {
			r.counts[ReasonNotPublisher]++
			continue
		}
		var t Tenure
		if a.last != nil {
			t.LastAuthorIsPublisher = a.roles.isPublisherKey(a.last.AuthorInstallationKey)
			t.LastAuthorBoundary = a.boundaries[string(a.last.AuthorInstallationKey)]
		}
		if why := CheckChain(a.last, e, t); why != "" {
			r.counts[ReasonChain]++
			continue
		}
		acc := ports.RemoteCommitLogEntry{
			GroupID:                   a.groupID,
			EnvelopeSequenceID:        o.seq,
			CommitSequenceID:          e.GetCommitSequenceId(),
			LastEpochAuthenticator:    e.GetLastEpochAuthenticator(),
			CommitResult:              ports.CommitResult(e.GetCommitResult()),
			AppliedEpochNumber:        e.GetAppliedEpochNumber(),
			AppliedEpochAuthenticator: e.GetAppliedEpochAuthenticator(),
			AuthorInstallationKey:     e.GetAuthorInstallationKey(),
			AcceptedAt:                a.now,
		}
		r.accepted = append(r.accepted, acc)
		a.last = &r.accepted[len(r.accepted)-1]
	}
	return r
}

// evaluate runs one page of envelopes through verification, admission and
// the chain, and stores the outcome in one transaction.
func (l *Log) evaluate(ctx context.Context, g ports.Group, keys Keys, envs []*backendpb.OriginatorEnvelope) (ReadReport, error) {
	prepared, verdicts := verifyPage(l.opts.Verifier, keys, g.ID, envs)
	var (
		rep    ReadReport
		counts map[Reason]uint64
		event  *ForkEvent
	)
	err := l.opts.Store.Tx(ctx, func(tx ports.Tx) error {
		rep, counts, event = ReadReport{}, nil, nil
		a, cur, err := l.loadAdmission(ctx, tx, g.ID)
		if err != nil {
			return err
		}
		res := a.admit(prepared, verdicts)
		remote := tx.RemoteCommitLog()
		for _, acc := range res.accepted {
			if _, err := remote.Insert(ctx, acc); err != nil {
				return err
			}
		}
		if err := remote.SetReadPosition(ctx, g.ID, a.pos); err != nil {
			return err
		}
		counts = res.counts
		rep.Evaluated, rep.Accepted, rep.Held = res.evaluated, len(res.accepted), res.held
		rep.ForkState, event, err = l.updateForkState(ctx, tx, cur)
		return err
	})
	if err != nil {
		return rep, fmt.Errorf("read commit log: %w", err)
	}
	l.count(counts)
	if event != nil && l.opts.OnForked != nil {
		l.opts.OnForked(*event)
	}
	return rep, nil
}

// loadAdmission reads the reader's admission state in tx.
func (l *Log) loadAdmission(ctx context.Context, tx ports.Tx, groupID []byte) (*admission, ports.Group, error) {
	cur, err := tx.Groups().Get(ctx, groupID)
	if err != nil {
		return nil, cur, err
	}
	view, err := l.opts.Views.Group(ctx, tx, groupID)
	if err != nil {
		return nil, cur, err
	}
	rs, err := l.roles(cur.ConversationType, view)
	if err != nil {
		return nil, cur, err
	}
	a := &admission{groupID: groupID, active: view.Active, cursor: cur.Cursor, roles: rs, now: l.opts.Clock.Now()}
	adm := tx.ReaderAdmission()
	if a.floor, _, err = adm.Floor(ctx, groupID); err != nil {
		return nil, cur, err
	}
	if a.boundaries, err = adm.Boundaries(ctx, groupID); err != nil {
		return nil, cur, err
	}
	remote := tx.RemoteCommitLog()
	if a.pos, err = remote.ReadPosition(ctx, groupID); err != nil {
		return nil, cur, err
	}
	if r, err := remote.Last(ctx, groupID); err == nil {
		a.last = &r
	} else if !errors.Is(err, ports.ErrNotFound) {
		return nil, cur, err
	}
	return a, cur, nil
}

// updateForkState recomputes the fork state (FORK-082) unless it is
// forked (FORK-041), stores it, and returns the event for a transition to
// forked.
func (l *Log) updateForkState(ctx context.Context, tx ports.Tx, g ports.Group) (ports.ForkState, *ForkEvent, error) {
	if g.ForkState == ports.ForkForked {
		return ports.ForkForked, nil, nil
	}
	local, err := tx.LocalCommitLog().List(ctx, g.ID, 0, 0)
	if err != nil {
		return 0, nil, err
	}
	remote, err := tx.RemoteCommitLog().List(ctx, g.ID, 0, 0)
	if err != nil {
		return 0, nil, err
	}
	computed, shared := EvaluateForkState(local, remote, g.Membership)
	next := NextForkState(g.ForkState, computed)
	if next != g.ForkState {
		if err := tx.Groups().Update(ctx, g.ID, func(gr *ports.Group) error {
			if gr.ForkState != ports.ForkForked {
				gr.ForkState = next
			}
			return nil
		}); err != nil {
			return 0, nil, err
		}
	}
	var ev *ForkEvent
	if next == ports.ForkForked && shared != nil {
		ev = &ForkEvent{
			GroupID:          bytes.Clone(g.ID),
			CommitSequenceID: shared.Local.CommitSequenceID,
			Local:            shared.Local.AppliedEpochAuthenticator,
			Remote:           shared.Remote.AppliedEpochAuthenticator,
			RemoteAuthor:     shared.Remote.AuthorInstallationKey,
		}
	}
	return next, ev, nil
}
