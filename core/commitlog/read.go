package commitlog

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

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
	// Ahead counts envelopes served with a sequence id above what the topic
	// and the group's own topic have shown (COMP-099): left unevaluated,
	// for a later pass.
	Ahead int
	// Rewound reports that the stored read position was above what the
	// topic and the group's own topic show, and was moved back (COMP-100).
	Rewound bool
	// ForkState is the conversation's fork state after the pass.
	ForkState ports.ForkState
}

// Read reads the conversation's commit-log topic from the stored read
// position and evaluates each new envelope once, in sequence id order
// (FORK-030): verification (FORK-077), admission (FORK-087, FORK-088) and
// the chain (FORK-083, FORK-089). A discarded envelope is counted under its
// [Reason] and never evaluated again. Evaluation stops, without moving the
// read position past it, at an entry naming a commit the reader has not
// processed while its state is active, and at an envelope whose sequence
// id is above the bound of COMP-099. The fork state is kept current
// (FORK-082) unless it is forked (FORK-041). A conversation whose log is
// not read (consent not allowed, one-shot, sync or restored groups, log
// disabled) is left as it is.
//
// A pass costs in proportion to the envelopes it is served, not to the
// conversation's history.
func (l *Log) Read(ctx context.Context, groupID []byte) (ReadReport, error) {
	var rep ReadReport
	if !l.opts.Enabled {
		return rep, nil
	}
	defer l.lock(groupID)()
	g, keys, pos, ok, err := l.readStart(ctx, groupID)
	if err != nil || !ok {
		rep.ForkState = g.ForkState
		return rep, err
	}
	bound, err := l.bound(ctx, keys, g)
	if err != nil {
		return rep, err
	}
	if pos > bound {
		if pos, rep.ForkState, err = l.rewind(ctx, groupID, bound); err != nil {
			return rep, err
		}
		rep.Rewound = true
	}
	// The stored read position moves only over entries that verified
	// (COMP-242); the pass reads past junk without storing it.
	pass := l.tails.Start(string(groupID), pos)
	defer pass.End()
	for {
		envs, err := l.opts.Transport.Query(ctx, keys.Topic, pass.Pos(), l.opts.PageSize)
		if err != nil {
			return rep, fmt.Errorf("read commit log: %w", err)
		}
		// What an earlier pass discarded, unchanged, is not evaluated
		// again (FORK-030).
		sums := make([][32]byte, len(envs))
		fresh := envs[:0:0]
		for i, env := range envs {
			sums[i] = envelopeSum(env)
			if !pass.Known(env.GetSequenceId(), sums[i]) {
				fresh = append(fresh, env)
			}
		}
		page, res, err := l.evaluate(ctx, groupID, keys, fresh, bound)
		if err != nil {
			return rep, err
		}
		rep.Evaluated += page.Evaluated
		rep.Accepted += page.Accepted
		rep.Ahead += page.Ahead
		rep.Held = page.Held
		rep.ForkState = page.ForkState
		before := pass.Pos()
		for i, env := range envs {
			seq := env.GetSequenceId()
			switch {
			case seq <= pass.Pos():
			case res.junk[seq] || pass.Known(seq, sums[i]):
				pass.ReadSum(seq, false, sums[i])
			case seq <= res.pos:
				pass.ReadSum(seq, true, sums[i])
			}
		}
		if len(envs) == 0 || page.Held != 0 || !pass.EndPage(pass.Pos() > before) {
			return rep, nil
		}
	}
}

// envelopeSum is the digest by which a pass recognises an envelope it
// discarded before (COMP-242).
func envelopeSum(env *backendpb.OriginatorEnvelope) [32]byte {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(env.GetEnvelope())
	return sha256.Sum256(b)
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
	bound      uint64 // highest sequence id evaluated in this pass (COMP-099)
	now        time.Time
}

// admitResult is what admitting one page produced.
type admitResult struct {
	accepted  []ports.RemoteCommitLogEntry
	counts    map[Reason]uint64
	evaluated int
	ahead     int
	held      uint64
	// junk are the envelopes that failed verification (FORK-077): they do
	// not move the stored read position (COMP-242).
	junk map[uint64]bool
}

// admit evaluates verified envelopes in order: replays are skipped,
// envelopes above the bound wait for a later pass, failed verification and
// the floor discard, an active reader holds at an entry naming a commit it
// has not processed, and the author and chain checks decide acceptance.
// Only evaluated envelopes move the read position.
func (a *admission) admit(prepared []*opened, verdicts []*RejectError) admitResult {
	r := admitResult{counts: map[Reason]uint64{}}
	for i, o := range prepared {
		switch {
		case o.seq <= a.pos:
			r.counts[ReasonReplay]++
			continue
		case o.seq > maxStorable:
			r.counts[ReasonOutOfRange]++ // COMP-101: never evaluated, never a position
			continue
		case o.seq > a.bound:
			r.counts[ReasonAhead]++ // COMP-099: evaluated once the topic shows it
			r.ahead++
			continue
		}
		if v := verdicts[i]; v != nil {
			r.discard(o.seq, v.Reason)
			continue
		}
		e := o.entry
		// FORK-087: the floor is checked before the hold, so an entry below
		// it never holds evaluation.
		if e.GetAppliedEpochNumber() < a.floor {
			r.discard(o.seq, ReasonBelowFloor)
			continue
		}
		if a.active && a.cursor < e.GetCommitSequenceId() {
			r.held = e.GetCommitSequenceId()
			break
		}
		if !a.roles.isPublisherKey(e.GetAuthorInstallationKey()) {
			r.discard(o.seq, ReasonNotPublisher)
			continue
		}
		if why := CheckChain(a.last, e, a.tenure()); why != "" {
			r.discard(o.seq, ReasonChain)
			continue
		}
		a.pos, r.evaluated = o.seq, r.evaluated+1
		r.accepted = append(r.accepted, ports.RemoteCommitLogEntry{
			GroupID:                   a.groupID,
			EnvelopeSequenceID:        o.seq,
			CommitSequenceID:          e.GetCommitSequenceId(),
			LastEpochAuthenticator:    e.GetLastEpochAuthenticator(),
			CommitResult:              ports.CommitResult(e.GetCommitResult()),
			AppliedEpochNumber:        e.GetAppliedEpochNumber(),
			AppliedEpochAuthenticator: e.GetAppliedEpochAuthenticator(),
			AuthorInstallationKey:     e.GetAuthorInstallationKey(),
			AcceptedAt:                a.now,
		})
		a.last = &r.accepted[len(r.accepted)-1]
	}
	return r
}

// discard counts an evaluated envelope that is not accepted. It does not
// move the stored read position (COMP-242): its sequence id is the
// delivery service's word alone, and a replayed or forged envelope placed
// at 2^62 must not hide the honest entries served after it at lower ids.
func (r *admitResult) discard(seq uint64, why Reason) {
	r.counts[why]++
	r.evaluated++
	if r.junk == nil {
		r.junk = map[uint64]bool{}
	}
	r.junk[seq] = true
}

// tenure is what FORK-083 needs about the last accepted entry's author:
// whether it is a publisher in the current tree and its own publisher
// boundary (FORK-089, COMP-091), not the candidate's.
func (a *admission) tenure() Tenure {
	if a.last == nil {
		return Tenure{}
	}
	return Tenure{
		LastAuthorIsPublisher: a.roles.isPublisherKey(a.last.AuthorInstallationKey),
		LastAuthorBoundary:    a.boundaries[string(a.last.AuthorInstallationKey)],
	}
}

// pageResult is where a page left the stored read position and which of
// its envelopes failed verification.
type pageResult struct {
	pos  uint64
	junk map[uint64]bool
}

// evaluate runs one page of envelopes through verification, admission and
// the chain, and stores the outcome and the fork state in one transaction.
func (l *Log) evaluate(ctx context.Context, groupID []byte, keys Keys, envs []*backendpb.OriginatorEnvelope, bound uint64) (ReadReport, pageResult, error) {
	prepared, verdicts := verifyPage(l.opts.Verifier, keys, groupID, envs)
	var (
		rep    ReadReport
		counts map[Reason]uint64
		event  *ForkEvent
		pr     pageResult
	)
	err := l.opts.Store.Tx(ctx, func(tx ports.Tx) error {
		rep, counts, event = ReadReport{}, nil, nil
		a, cur, err := l.loadAdmission(ctx, tx, groupID)
		if err != nil {
			return err
		}
		a.bound = bound
		res := a.admit(prepared, verdicts)
		t, err := track(ctx, tx, cur, false)
		if err != nil {
			return err
		}
		remote := tx.RemoteCommitLog()
		for _, acc := range res.accepted {
			if _, err := remote.Insert(ctx, acc); err != nil {
				return err
			}
			if err := t.remote(ctx, acc); err != nil {
				return err
			}
		}
		if err := remote.SetReadPosition(ctx, groupID, a.pos); err != nil {
			return err
		}
		counts, pr = res.counts, pageResult{pos: a.pos, junk: res.junk}
		rep.Evaluated, rep.Accepted, rep.Held, rep.Ahead = res.evaluated, len(res.accepted), res.held, res.ahead
		rep.ForkState, event, err = t.finish(ctx)
		return err
	})
	if err != nil {
		return rep, pageResult{}, fmt.Errorf("read commit log: %w", err)
	}
	l.count(counts)
	l.notify(event)
	return rep, pr, nil
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
