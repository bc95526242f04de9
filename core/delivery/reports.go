package delivery

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

var _ ports.DeliveryWitness = (*Service)(nil)

// Report implements [ports.DeliveryWitness] (ADR-0030 Decisions 3 and
// 6). OK and refused reports are on the group's pending commit, by a
// witness: an installation whose leaf is in the states both before and
// after the commit, of an inbox other than the committer's; for a resync
// or recovery join the joining inbox's installations may refuse, and
// their OK is kept without counting (COMP-412). Stuck reports are on a
// commit confirmed after two phases, by an installation with a leaf in
// the group's current or previous state, of another inbox than the
// committer's. The installation's inbox is its leaf credential's. The
// first report of each installation is kept; a later one succeeds and
// changes nothing.
func (s *Service) Report(ctx context.Context, caller ports.Caller, r ports.Report) error {
	if err := s.report(ctx, caller, r); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

func (s *Service) report(ctx context.Context, caller ports.Caller, r ports.Report) error {
	if !caller.Authenticated() {
		return fmt.Errorf("%w: reporting needs an authenticated connection", ports.ErrUnauthenticated)
	}
	if err := s.witnessReady(); err != nil {
		return err
	}
	if _, _, err := ParseTopic(append([]byte{byte(ports.TopicGroupMessages)}, r.GroupID...)); err != nil {
		return err
	}
	switch r.Verdict {
	case ports.VerdictOK:
		if r.Reason != "" {
			return invalid("an OK report carries no reason (got %q)", r.Reason)
		}
	case ports.VerdictRefused, ports.VerdictStuck:
		if !ports.ValidReportReason(r.Reason) {
			return invalid("reason %q is not a report reason class", r.Reason)
		}
	default:
		return invalid("verdict %d is not OK, refused or stuck", r.Verdict)
	}
	if r.Verdict == ports.VerdictStuck {
		return s.stuck(ctx, caller, r)
	}
	return s.witness(ctx, caller, r)
}

// witnessReady fails unless two phases run.
func (s *Service) witnessReady() error {
	if s.acceptErr != nil {
		return s.acceptErr
	}
	if !s.twoPhase() {
		return invalid("this delivery service takes commits in one phase: there is nothing to report on")
	}
	if s.opts.Clock == nil {
		return errNoClock
	}
	return nil
}

// witness stores an OK or refused report on the pending commit and
// decides it when that is due: a refusal drops it at once, an OK with
// no grace period confirms it.
func (s *Service) witness(ctx context.Context, caller ports.Caller, r ports.Report) error {
	p, err := s.acc.PendingCommit(ctx, r.GroupID)
	if errors.Is(err, ports.ErrNotFound) || err == nil && p.CommitSeq != r.CommitSeq {
		return fmt.Errorf("%w: commit %d is not the pending commit of group %x", ports.ErrNotFound, r.CommitSeq, r.GroupID)
	}
	if err != nil {
		return err
	}
	cur, err := s.states.PublicState(ctx, r.GroupID)
	if err != nil {
		return err
	}
	before, err := s.viewState(ctx, r.GroupID, cur.State)
	if err != nil {
		return err
	}
	after, err := s.viewState(ctx, r.GroupID, p.State)
	if err != nil {
		return err
	}
	inbox, inBefore := leafInbox(before, caller.InstallationKey)
	_, inAfter := leafInbox(after, caller.InstallationKey)
	if !inBefore || !inAfter {
		return invalid("installation %x is no witness of commit %d: it is not a member both before and after it", short(caller.InstallationKey), r.CommitSeq)
	}
	counts := true
	if isOwnerJoin(before, p) {
		counts = ownerJoinCounts(before, after, p, inbox, caller.InstallationKey) // amendment rule 3
	} else if inbox == p.Committer {
		switch {
		case !p.External:
			return invalid("installation %x is of the committer's inbox: no witness of its commit", short(caller.InstallationKey))
		case r.Verdict == ports.VerdictOK:
			counts = false // the joining inbox may refuse its join; its OK proves nothing
		}
	}
	added, err := s.acc.AddReport(ctx, ports.AcceptanceReport{GroupID: r.GroupID, CommitSeq: r.CommitSeq, InstallationKey: caller.InstallationKey,
		InboxID: inbox, Verdict: r.Verdict, Reason: r.Reason, Counts: counts, ReportedNS: s.opts.Clock.Now().UnixNano()})
	if err != nil || !added {
		return err
	}
	s.reported(r)
	if counts && (r.Verdict == ports.VerdictRefused || s.tp.GracePeriod == 0) {
		if _, err := s.settle(ctx, r.GroupID); err != nil {
			return err
		}
	}
	s.wakeRunner()
	return nil
}

// stuck stores a stuck report on a confirmed commit, tells the group,
// and with reason tag, path or group-info quarantines the committer's
// inbox, once per commit (Decision 6).
func (s *Service) stuck(ctx context.Context, caller ports.Caller, r ports.Report) error {
	ac, err := s.acc.AcceptedCommit(ctx, r.GroupID, r.CommitSeq)
	if err != nil {
		return err
	}
	if ac.Outcome != ports.OutcomeConfirmed {
		return fmt.Errorf("%w: commit %d of group %x was not confirmed", ports.ErrNotFound, r.CommitSeq, r.GroupID)
	}
	inbox, member, err := s.memberNowOrBefore(ctx, r.GroupID, caller.InstallationKey)
	if err != nil {
		return err
	}
	if !member {
		return invalid("installation %x has no leaf in group %x", short(caller.InstallationKey), r.GroupID)
	}
	if inbox == ac.Committer {
		return invalid("installation %x is of the committer's inbox", short(caller.InstallationKey))
	}
	rep := ports.AcceptanceReport{GroupID: r.GroupID, CommitSeq: r.CommitSeq, InstallationKey: caller.InstallationKey, InboxID: inbox,
		Verdict: ports.VerdictStuck, Reason: r.Reason, Counts: true, ReportedNS: s.opts.Clock.Now().UnixNano()}
	added, err := s.acc.AddReport(ctx, rep)
	if err != nil || !added {
		return err
	}
	s.reported(r)
	now := s.opts.Clock.Now()
	always, err := notices(r.GroupID, now, &backendpb.AcceptanceNotice{Outcome: backendpb.AcceptanceNotice_STUCK, CommitSequenceId: r.CommitSeq,
		InboxId: []byte(ac.Committer), Reports: reportsPB([]ports.AcceptanceReport{rep})})
	if err != nil {
		return err
	}
	defer s.notifyGroup(r.GroupID)
	s.event(EventStuck)
	if r.Reason != ports.ReportTag && r.Reason != ports.ReportPath && r.Reason != ports.ReportGroupInfo {
		_, err := s.store.Append(ctx, always)
		return err
	}
	q, err := notices(r.GroupID, now, &backendpb.AcceptanceNotice{Outcome: backendpb.AcceptanceNotice_QUARANTINED, CommitSequenceId: r.CommitSeq,
		InboxId: []byte(ac.Committer)})
	if err != nil {
		return err
	}
	changed, _, err := s.acc.ChangeQuarantine(ctx, ports.QuarantineChange{GroupID: r.GroupID, InboxID: ac.Committer, StuckCommit: r.CommitSeq,
		SinceNS: now.UnixNano(), Always: always, Notices: q})
	if err == nil && changed {
		s.event(EventQuarantined)
	}
	return err
}

// memberNowOrBefore returns the inbox of the installation's leaf in the
// group's current or previous state.
func (s *Service) memberNowOrBefore(ctx context.Context, group, key []byte) (string, bool, error) {
	cur, err := s.states.PublicState(ctx, group)
	if err != nil {
		return "", false, err
	}
	v, err := s.viewState(ctx, group, cur.State)
	if err != nil {
		return "", false, err
	}
	if in, ok := leafInbox(v, key); ok {
		return in, true, nil
	}
	prev, err := s.acc.PreviousState(ctx, group)
	if errors.Is(err, ports.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	if v, err = s.viewState(ctx, group, prev.State); err != nil {
		return "", false, err
	}
	in, ok := leafInbox(v, key)
	return in, ok, nil
}

func (s *Service) viewState(ctx context.Context, group, state []byte) (ports.GroupView, error) {
	v, err := s.viewer.View(ctx, state)
	if err != nil {
		return ports.GroupView{}, fmt.Errorf("%w: a stored public state of group %x does not load: %w", ports.ErrUnavailable, group, err)
	}
	return v, nil
}

// leafInbox returns the inbox of the leaf whose signature key is key.
func leafInbox(v ports.GroupView, key []byte) (string, bool) {
	for _, m := range v.Members {
		if bytes.Equal(m.SignatureKey, key) {
			return m.InboxID, true
		}
	}
	return "", false
}

func short(b []byte) []byte {
	if len(b) > 8 {
		return b[:8]
	}
	return b
}

// reported tells the observer of a stored report.
func (s *Service) reported(r ports.Report) {
	o, ok := s.opts.Observer.(AcceptanceObserver)
	if !ok {
		return
	}
	v := map[ports.Verdict]string{ports.VerdictOK: "ok", ports.VerdictRefused: "refused", ports.VerdictStuck: "stuck"}[r.Verdict]
	o.Reported(v, r.Reason)
}
