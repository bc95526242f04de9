package delivery

import (
	"context"
	"fmt"

	"github.com/regroup-mls/regroup/core/policy"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// Quarantines (ADR-0030 Decision 5). A drop, or a stuck report with
// reason tag, path or group-info, quarantines the committer's inbox in
// the group: its commits are refused with [ports.ErrQuarantined]
// (pending.go), its other messages pass. A super admin's installation
// lifts it ([Service.Lift]); a commit that leaves the inbox no leaf ends
// it (COMP-418).

// Lift implements [ports.DeliveryWitness]: the caller's installation must
// have a leaf of a super admin inbox in the group's current state. It
// stores a LIFTED notice on the group's topic with the change. Lifting a
// block of an installation (block.go) that is not blocked fails with an
// error wrapping [ports.ErrNotFound].
func (s *Service) Lift(ctx context.Context, caller ports.Caller, l ports.Lift) error {
	if err := s.lift(ctx, caller, l); err != nil {
		return fmt.Errorf("lift: %w", err)
	}
	return nil
}

func (s *Service) lift(ctx context.Context, caller ports.Caller, l ports.Lift) error {
	if !caller.Authenticated() {
		return fmt.Errorf("%w: lifting needs an authenticated connection", ports.ErrUnauthenticated)
	}
	if err := s.witnessReady(); err != nil {
		return err
	}
	if (len(l.InboxID) == 0) == (len(l.InstallationKey) == 0) {
		return invalid("a lift names exactly one of an inbox and an installation")
	}
	cur, err := s.states.PublicState(ctx, l.GroupID)
	if err != nil {
		return err
	}
	v, err := s.viewState(ctx, l.GroupID, cur.State)
	if err != nil {
		return err
	}
	by, ok := leafInbox(v, caller.InstallationKey)
	roles, rerr := policy.RolesOf(v)
	if !ok || rerr != nil || !roles.SuperAdmin(by) {
		return invalid("installation %x is not a super admin's member of group %x", short(caller.InstallationKey), l.GroupID)
	}
	if len(l.InstallationKey) != 0 {
		return s.liftBlock(ctx, l) // block.go
	}
	ns, err := notices(l.GroupID, s.opts.Clock.Now(), &backendpb.AcceptanceNotice{Outcome: backendpb.AcceptanceNotice_LIFTED, InboxId: l.InboxID})
	if err != nil {
		return err
	}
	if _, _, err := s.acc.ChangeQuarantine(ctx, ports.QuarantineChange{GroupID: l.GroupID, InboxID: string(l.InboxID), Lift: true, Notices: ns}); err != nil {
		return err
	}
	s.event(EventLifted)
	s.notifyGroup(l.GroupID)
	return nil
}

// Quarantined returns the inboxes quarantined in the group (for
// operators and tests); nil when two phases are off.
func (s *Service) Quarantined(ctx context.Context, group []byte) ([]string, error) {
	if !s.twoPhase() {
		return nil, nil
	}
	return s.acc.Quarantined(ctx, group)
}
