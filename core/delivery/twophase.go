package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// Commit acceptance in two phases (ADR-0030 Decisions 1 to 6, COMP-410
// to COMP-434). With Options.TwoPhase set beside Options.PublicGroups:
//
//   - a commit whose committer inbox is not a super admin in the epoch
//     before it (resyncs and recovery joins included) becomes its
//     group's single pending commit (pending.go): stored marked pending
//     with its GroupInfo, its state beside the current one;
//   - witnesses report on it ([Service.Report], reports.go); a refusal
//     drops it at once and quarantines the committer's inbox, the end of
//     the grace period after the first counting report confirms it on at
//     least one OK inbox, and no counting report before Expiry expires it
//     ([Service.RunAcceptance], decide.go);
//   - every outcome is an AcceptanceNotice the service stores on the
//     group's topic;
//   - quarantined inboxes' commits are refused, a super admin lifts a
//     quarantine ([Service.Lift], quarantine.go).
//
// Every piece of state is in the store ([ports.AcceptanceStore]): a
// restart, or another replica sharing the database, carries on where
// this process stopped.

// TwoPhaseOptions configures commit acceptance in two phases. Zero
// fields select the defaults.
type TwoPhaseOptions struct {
	// GracePeriod runs from a pending commit's first counting report to
	// its confirmation; default 10 s, negative for none (a commit is then
	// confirmed on its first OK).
	GracePeriod time.Duration
	// Expiry is how long a pending commit without a counting report
	// waits before it expires; default 72 h.
	Expiry time.Duration
	// OwnerJoinLimit is how long a super admin's resync or recovery join
	// that waits for its inbox's other installations (ownerjoin.go)
	// waits without a report of theirs before it is confirmed; default
	// 10 min.
	OwnerJoinLimit time.Duration
	// ReportRetention is how long reports and decided commits are kept
	// after the decision; default 30 days. [Service.SweepExpired]
	// deletes older ones.
	ReportRetention time.Duration
	// Tick bounds how long [Service.RunAcceptance] sleeps between two
	// looks at the pending commits (it wakes earlier for a report or a
	// due decision); default 1 s.
	Tick time.Duration
}

func (o *TwoPhaseOptions) withDefaults() TwoPhaseOptions {
	r := *o
	if r.GracePeriod == 0 {
		r.GracePeriod = 10 * time.Second
	}
	if r.GracePeriod < 0 {
		r.GracePeriod = 0
	}
	if r.Expiry <= 0 {
		r.Expiry = 72 * time.Hour
	}
	if r.OwnerJoinLimit <= 0 {
		r.OwnerJoinLimit = 10 * time.Minute
	}
	if r.ReportRetention <= 0 {
		r.ReportRetention = 30 * 24 * time.Hour
	}
	if r.Tick <= 0 {
		r.Tick = time.Second
	}
	return r
}

// Refusal reasons of two-phase acceptance, as [Observer.Refused] names
// them.
const (
	RefusedCommitPending = "commit_pending"
	RefusedQuarantined   = "quarantined"
)

// Acceptance events, as [AcceptanceObserver.Acceptance] names them.
const (
	EventPending     = "pending"
	EventConfirmed   = "confirmed"
	EventDropped     = "dropped"
	EventExpired     = "expired"
	EventSuperseded  = "superseded"
	EventQuarantined = "quarantined"
	EventLifted      = "lifted"
	EventStuck       = "stuck"
)

// AcceptanceEvents lists every acceptance event, for metrics that report
// them at zero from the start.
var AcceptanceEvents = []string{EventPending, EventConfirmed, EventDropped, EventExpired, EventSuperseded,
	EventQuarantined, EventLifted, EventStuck, EventBlocked}

// AcceptanceObserver is an optional interface of an [Observer] that
// hears two-phase acceptance.
type AcceptanceObserver interface {
	// Acceptance reports one event (the Event constants).
	Acceptance(event string)
	// Reported reports a stored report: its verdict ("ok", "refused",
	// "stuck") and reason class (empty for ok).
	Reported(verdict, reason string)
	// Confirmation reports the time from a commit's acceptance as pending
	// to its confirmation.
	Confirmation(d time.Duration)
}

func (s *Service) event(e string) {
	if o, ok := s.opts.Observer.(AcceptanceObserver); ok {
		o.Acceptance(e)
	}
}

// twoPhase reports whether commits take two phases.
func (s *Service) twoPhase() bool { return s.acc != nil }

// TwoPhase reports whether the service runs commit acceptance in two
// phases (Options.TwoPhase).
func (s *Service) TwoPhase() bool { return s.twoPhase() }

// setupTwoPhase checks what two phases need.
func (s *Service) setupTwoPhase() {
	if s.opts.TwoPhase == nil {
		return
	}
	tp := s.opts.TwoPhase.withDefaults()
	s.tp = tp
	s.wake = make(chan struct{}, 1)
	if s.opts.PublicGroups == nil {
		s.acceptErr = fmt.Errorf("%w: two-phase commit acceptance needs commit acceptance (Options.PublicGroups)", ports.ErrUnavailable)
		return
	}
	acc, ok := s.store.(ports.AcceptanceStore)
	if !ok {
		s.acceptErr = fmt.Errorf("%w: two-phase commit acceptance is on but the envelope store %T keeps no pending commits", ports.ErrUnavailable, s.store)
		return
	}
	s.acc = acc
}

// notice is a service-authored AcceptanceNotice envelope on the group's
// topic, stamped now.
func notice(group []byte, n *backendpb.AcceptanceNotice, now time.Time) (ports.NewStoredEnvelope, error) {
	topic := append([]byte{byte(ports.TopicGroupMessages)}, group...)
	env := &backendpb.ClientEnvelope{TargetTopic: topic, Payload: &backendpb.ClientEnvelope_AcceptanceNotice{AcceptanceNotice: n}}
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(env)
	if err != nil {
		return ports.NewStoredEnvelope{}, fmt.Errorf("acceptance notice: %w", err)
	}
	return ports.NewStoredEnvelope{Topic: topic, Envelope: raw, ServerTimestampNS: now.UnixNano()}, nil
}

// ExpiredNotice is the EXPIRED notice of pending commit p, for a restore
// that marks it stale (COMP-468).
func ExpiredNotice(p ports.PendingCommit, now time.Time) (ports.NewStoredEnvelope, error) {
	return notice(p.GroupID, &backendpb.AcceptanceNotice{Outcome: backendpb.AcceptanceNotice_EXPIRED, CommitSequenceId: p.CommitSeq,
		Epoch: p.Epoch - 1, InboxId: []byte(p.Committer)}, now)
}

// notices builds one envelope per notice.
func notices(group []byte, now time.Time, ns ...*backendpb.AcceptanceNotice) ([]ports.NewStoredEnvelope, error) {
	out := make([]ports.NewStoredEnvelope, 0, len(ns))
	for _, n := range ns {
		e, err := notice(group, n, now)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// reportsPB turns stored reports into a notice's.
func reportsPB(rs []ports.AcceptanceReport) []*backendpb.AcceptanceReport {
	out := make([]*backendpb.AcceptanceReport, 0, len(rs))
	for _, r := range rs {
		out = append(out, &backendpb.AcceptanceReport{InstallationKey: r.InstallationKey, InboxId: []byte(r.InboxID),
			Verdict: backendpb.AcceptanceReport_Verdict(r.Verdict), Reason: r.Reason})
	}
	return out
}

// notify wakes the subscribers of the group's topics after the service
// appended notices or changed its GroupInfo topic.
func (s *Service) notifyGroup(group []byte) {
	s.hub.notify(append([]byte{byte(ports.TopicGroupMessages)}, group...))
	s.hub.notify(append([]byte{byte(ports.TopicGroupInfo)}, group...))
}

// wakeRunner makes [Service.RunAcceptance] look at the pending commits
// at once.
func (s *Service) wakeRunner() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// RunAcceptance decides the pending commits whose grace period ended or
// that expired, until ctx ends (COMP-415): at start (a restart carries
// on with the pending commits the store holds), after each report, and
// at least every Options.TwoPhase.Tick. report, if not nil, receives
// each failure. Several processes sharing a database may each run it:
// the store decides each commit once. It returns at once when two
// phases are off.
func (s *Service) RunAcceptance(ctx context.Context, report func(error)) {
	if !s.twoPhase() || s.opts.Clock == nil {
		return
	}
	for {
		next, err := s.DecideDue(ctx)
		if err != nil && report != nil && ctx.Err() == nil {
			report(err)
		}
		wait := s.tp.Tick
		if !next.IsZero() {
			if d := next.Sub(s.opts.Clock.Now()); d < wait {
				wait = max(d, time.Millisecond)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-s.opts.Clock.After(wait):
		}
	}
}

// DecideDue decides every pending commit that is due now and returns
// when the next one falls due (zero when none waits).
func (s *Service) DecideDue(ctx context.Context) (time.Time, error) {
	if !s.twoPhase() {
		return time.Time{}, nil
	}
	if s.opts.Clock == nil {
		return time.Time{}, errNoClock
	}
	ps, err := s.acc.PendingCommits(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("decide due: %w", err)
	}
	var next time.Time
	var errs []error
	for _, p := range ps {
		due, err := s.settle(ctx, p.GroupID)
		if err != nil {
			errs = append(errs, err)
		}
		if !due.IsZero() && (next.IsZero() || due.Before(next)) {
			next = due
		}
	}
	return next, errors.Join(errs...)
}

// sweepReports deletes the reports and decided commits whose decision
// is older than ReportRetention (Decision 3: kept 30 days).
func (s *Service) sweepReports(ctx context.Context) error {
	if !s.twoPhase() {
		return nil
	}
	_, err := s.acc.DeleteDecidedBefore(ctx, s.opts.Clock.Now().Add(-s.tp.ReportRetention).UnixNano())
	return err
}

// PendingCount returns how many commits are pending now (0 when two
// phases are off).
func (s *Service) PendingCount(ctx context.Context) (int, error) {
	if !s.twoPhase() {
		return 0, nil
	}
	ps, err := s.acc.PendingCommits(ctx)
	return len(ps), err
}
