package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// settle decides the group's pending commit if it is due (ADR-0030
// Decision 4) and otherwise returns when it falls due:
//
//   - a counting refusal drops it at once (COMP-413) and quarantines the
//     committer's inbox;
//   - the end of the grace period after its first counting report
//     confirms it: every counting report then is an OK (a refusal would
//     have dropped it), so at least one witness inbox reported OK and
//     none refused;
//   - without a counting report, Expiry after its acceptance expires it,
//     nobody quarantined.
//
// Another replica that decided first makes the store refuse this
// decision ([ports.ErrStateMoved]), which settle takes as done.
func (s *Service) settle(ctx context.Context, group []byte) (time.Time, error) {
	p, err := s.acc.PendingCommit(ctx, group)
	if errors.Is(err, ports.ErrNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("settle group %x: %w", group, err)
	}
	reports, err := s.acc.Reports(ctx, group, p.CommitSeq)
	if err != nil {
		return time.Time{}, fmt.Errorf("settle group %x: %w", group, err)
	}
	now := s.opts.Clock.Now()
	refused, ok := false, map[string]bool{}
	for _, r := range reports {
		if !r.Counts {
			continue
		}
		switch r.Verdict {
		case ports.VerdictRefused:
			refused = true
		case ports.VerdictOK:
			ok[r.InboxID] = true
		}
	}
	d := ports.AcceptanceDecision{GroupID: group, CommitSeq: p.CommitSeq, DecidedNS: now.UnixNano()}
	forEpoch := p.Epoch - 1
	var ns []*backendpb.AcceptanceNotice
	switch {
	case refused:
		d.Outcome = ports.OutcomeDropped
		ns = append(ns, &backendpb.AcceptanceNotice{Outcome: backendpb.AcceptanceNotice_DROPPED, CommitSequenceId: p.CommitSeq, Epoch: forEpoch,
			InboxId: []byte(p.Committer), Reports: reportsPB(reports)})
		if d.Block, err = s.blockFor(ctx, p, reports, now.UnixNano()); err != nil { // amendment rule 2
			return time.Time{}, fmt.Errorf("settle group %x: %w", group, err)
		}
		if d.Block != nil {
			ns = append(ns, &backendpb.AcceptanceNotice{Outcome: backendpb.AcceptanceNotice_BLOCKED, CommitSequenceId: p.CommitSeq, Epoch: forEpoch,
				InboxId: []byte(p.Committer), InstallationKey: d.Block.InstallationKey})
			break
		}
		d.Quarantine = p.Committer
		ns = append(ns, &backendpb.AcceptanceNotice{Outcome: backendpb.AcceptanceNotice_QUARANTINED, CommitSequenceId: p.CommitSeq, Epoch: forEpoch,
			InboxId: []byte(p.Committer)})
	case p.FirstReportNS != 0:
		end := time.Unix(0, p.FirstReportNS).Add(s.tp.GracePeriod)
		if now.Before(end) {
			return end, nil
		}
		if len(ok) == 0 {
			return time.Time{}, nil // only non-counting reports: cannot happen, FirstReportNS is set by counting ones
		}
		if ns, err = s.confirmation(ctx, p, &d, reports); err != nil {
			return time.Time{}, err
		}
	default:
		owner, err := s.ownerJoinPending(ctx, p)
		if err != nil {
			return time.Time{}, fmt.Errorf("settle group %x: %w", group, err)
		}
		if owner { // amendment rule 3: none of the inbox's other installations reported before the limit
			end := time.Unix(0, p.CreatedNS).Add(s.tp.OwnerJoinLimit)
			if now.Before(end) {
				return end, nil
			}
			if ns, err = s.confirmation(ctx, p, &d, reports); err != nil {
				return time.Time{}, err
			}
			break
		}
		end := time.Unix(0, p.CreatedNS).Add(s.tp.Expiry)
		if now.Before(end) {
			return end, nil
		}
		d.Outcome = ports.OutcomeExpired
		ns = append(ns, &backendpb.AcceptanceNotice{Outcome: backendpb.AcceptanceNotice_EXPIRED, CommitSequenceId: p.CommitSeq,
			Epoch: forEpoch, InboxId: []byte(p.Committer)})
	}
	if d.Notices, err = notices(group, now, ns...); err != nil {
		return time.Time{}, err
	}
	_, err = s.acc.Decide(ctx, d)
	if c, ok := s.states.(*cachingStates); ok {
		c.drop(group) // a confirmation moved the current state outside AppendWithState
	}
	s.notifyGroup(group)
	if errors.Is(err, ports.ErrStateMoved) {
		return time.Time{}, nil // another replica decided it
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("settle group %x: %w", group, err)
	}
	switch d.Outcome {
	case ports.OutcomeDropped:
		s.event(EventDropped)
		if d.Block != nil {
			s.event(EventBlocked)
		} else {
			s.event(EventQuarantined)
		}
	case ports.OutcomeExpired:
		s.event(EventExpired)
	case ports.OutcomeConfirmed:
		s.event(EventConfirmed)
		if o, ok := s.opts.Observer.(AcceptanceObserver); ok {
			o.Confirmation(now.Sub(time.Unix(0, p.CreatedNS)))
		}
	}
	return time.Time{}, nil
}

// confirmation makes d confirm the pending commit p: the quarantines
// and blocks it ends, and its CONFIRMED notice.
func (s *Service) confirmation(ctx context.Context, p ports.PendingCommit, d *ports.AcceptanceDecision, reports []ports.AcceptanceReport) ([]*backendpb.AcceptanceNotice, error) {
	var err error
	d.Outcome = ports.OutcomeConfirmed
	if d.Unquarantine, err = s.leftQuarantined(ctx, p.GroupID, p.State); err != nil {
		return nil, fmt.Errorf("settle group %x: %w", p.GroupID, err)
	}
	if d.Unblock, err = s.leftBlockedByPending(ctx, p.GroupID, p.State); err != nil {
		return nil, fmt.Errorf("settle group %x: %w", p.GroupID, err)
	}
	return []*backendpb.AcceptanceNotice{{Outcome: backendpb.AcceptanceNotice_CONFIRMED, CommitSequenceId: p.CommitSeq,
		Epoch: p.Epoch - 1, InboxId: []byte(p.Committer), Reports: reportsPB(reports)}}, nil
}

// leftQuarantined returns the group's quarantined inboxes of which state
// keeps no leaf (Decision 5: removing an inbox ends its quarantine).
func (s *Service) leftQuarantined(ctx context.Context, group, state []byte) ([]string, error) {
	q, err := s.acc.Quarantined(ctx, group)
	if err != nil || len(q) == 0 {
		return nil, err
	}
	v, err := s.viewer.View(ctx, state)
	if err != nil {
		return nil, fmt.Errorf("%w: a stored public state of group %x does not load: %w", ports.ErrUnavailable, group, err)
	}
	return notMembers(q, v), nil
}

// notMembers returns the inboxes of q with no leaf in v.
func notMembers(q []string, v ports.GroupView) []string {
	var out []string
	for _, in := range q {
		found := false
		for _, m := range v.Members {
			if m.InboxID == in {
				found = true
				break
			}
		}
		if !found {
			out = append(out, in)
		}
	}
	return out
}
