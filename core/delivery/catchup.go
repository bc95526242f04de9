package delivery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/regroup-mls/regroup/core/internal/mlsframe"
	"github.com/regroup-mls/regroup/core/policy"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// Catch-up after a restore (ADR-0030 Decision 9, amendment rule 4;
// COMP-490 to COMP-497). Restore mode puts every group with a public
// state in catch-up at its restored epoch (deliverydb delivery_catch_up).
// While a group is in catch-up, a commit published to its topic is an
// upload of a commit the members merged after that epoch, and travels as
// any commit publish does; the service checks it against public state and
// the role policy as usual, with these differences:
//
//   - its author is the commit's sender leaf (the validator's
//     [ports.PublicCommit].Sender), not the publishing connection;
//   - it is not witnessed again: no two phases;
//   - it is taken only when the publishing installation is of another
//     inbox than its author's, or of a super admin of the epoch before it,
//     or the group has one inbox; otherwise it is refused with
//     [ports.ErrCatchUp], so a member cannot slip in its own commit that
//     the restore dropped;
//   - a commit for an epoch that catch-up already took a different commit
//     for is a conflict. When the commit taken was uploaded by a super
//     admin's installation and this one is not, the super admin's chain
//     stands and the upload is refused (its members resync); otherwise the
//     group's catch-up stops: an AcceptanceNotice STOPPED goes on the
//     group topic, and every later commit is refused with
//     [ports.ErrCatchUp] but a super admin's pointer to the group's
//     successor (catchup_stopped.go): a move to a new group settles it.
//
// A group leaves catch-up when CatchUpWindow passes without a taken
// upload (counted from the restore, then from each taken upload); the
// check runs on its next commit publish.

// DefaultCatchUpWindow is Options.CatchUpWindow's default.
const DefaultCatchUpWindow = 10 * time.Minute

// RefusedCatchUp is the refusal reason of a commit a group in catch-up
// does not take.
const RefusedCatchUp = "catch_up"

// catchUpTrack is one group's catch-up as a batch sees it.
type catchUpTrack struct {
	loaded bool
	on     bool
	state  ports.CatchUpState
}

// callerKey carries the publishing connection to commit acceptance.
type callerKey struct{}

// withCaller returns ctx carrying the publishing caller.
func withCaller(ctx context.Context, c ports.Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

func callerOf(ctx context.Context) ports.Caller {
	c, _ := ctx.Value(callerKey{}).(ports.Caller)
	return c
}

// catchUpWindow is Options.CatchUpWindow with its default.
func (s *Service) catchUpWindow() time.Duration {
	if s.opts.CatchUpWindow > 0 {
		return s.opts.CatchUpWindow
	}
	return DefaultCatchUpWindow
}

// inCatchUp loads t's catch-up and ends it when its window passed.
func (s *Service) inCatchUp(ctx context.Context, t *groupTrack) (ports.CatchUpStore, bool, error) {
	cs, ok := s.store.(ports.CatchUpStore)
	if !ok || t.stored == nil {
		return nil, false, nil
	}
	if _, out := s.notCatchingUp.Load(string(t.group)); out {
		return nil, false, nil
	}
	if !t.cu.loaded {
		st, on, err := cs.CatchUpOf(ctx, t.group)
		if err != nil {
			return nil, false, because(RefusedUnavailable, fmt.Errorf("%w: catch-up of group %x: %w", ports.ErrUnavailable, t.group, err))
		}
		t.cu = catchUpTrack{loaded: true, on: on, state: st}
		if on && !st.Stopped && s.opts.Clock.Now().Sub(st.Progress) > s.catchUpWindow() {
			if err := cs.EndCatchUp(ctx, t.group); err != nil {
				return nil, false, because(RefusedUnavailable, fmt.Errorf("%w: end catch-up of group %x: %w", ports.ErrUnavailable, t.group, err))
			}
			t.cu.on = false
		}
		if !t.cu.on {
			s.notCatchingUp.Store(string(t.group), struct{}{})
		}
	}
	return cs, t.cu.on, nil
}

// catchUpCommit handles envelope i, a commit to t's group, when the group
// is in catch-up; handled false leaves it to ordinary acceptance.
func (s *Service) catchUpCommit(ctx context.Context, i int, topic []byte, t *groupTrack, msg, digest []byte) (handled bool, err error) {
	cs, on, err := s.inCatchUp(ctx, t)
	if err != nil || !on {
		return false, err
	}
	if t.cu.state.Stopped {
		return true, s.stoppedCommit(ctx, i, topic, t, msg, digest) // catchup_stopped.go
	}
	pc, err := guarded(func() (ports.PublicCommit, error) { return s.opts.PublicGroups.Apply(ctx, t.state, msg) })
	if err != nil {
		switch ports.RefusalReason(err) {
		case ports.RefusedEpoch:
		case ports.RefusedSignature:
			// For the state's epoch number but not signed over its group
			// context: a commit of another branch (COMP-494).
			return true, refuseCatchUp(i, topic, t, fmt.Errorf("a commit of another chain for epoch %d: %w", t.epoch, err))
		default:
			return true, refusePublic(i, topic, err)
		}
		return true, s.catchUpOtherEpoch(ctx, cs, i, topic, t, msg, digest, err)
	}
	before, err := s.viewOf(ctx, t)
	if err != nil {
		return true, err
	}
	if err := s.refuseRevoked(ctx, i, topic, t, before, pc); err != nil { // revoked.go
		return true, err
	}
	uploader, superAdmin := uploaderOf(before, callerOf(ctx).InstallationKey)
	// A resync or recovery join is a new external commit, not one the
	// restore dropped: policy.External decides it (COMP-492).
	external := pc.SenderType == ports.SenderNewMemberCommit
	if !external && (uploader == "" || (uploader == pc.Sender.InboxID && !superAdmin && inboxCount(before) > 1)) {
		return true, refuseCatchUp(i, topic, t, fmt.Errorf("the commit of %q for epoch %d is taken only from another inbox's or a super admin's installation", pc.Sender.InboxID, before.Epoch))
	}
	if err := s.admitCommitPolicy(ctx, before, pc); err != nil {
		if errors.Is(err, ports.ErrUnavailable) && !errors.Is(err, policy.ErrNotPermitted) {
			return true, because(RefusedUnavailable, fmt.Errorf("envelope %d: commit to group %x: %w", i, t.group, err))
		}
		return true, &refusal{reason: policyReason(err), kind: KindName(topic),
			err: fmt.Errorf("envelope %d: %w: commit to group %x refused by the role policy: %w", i, ports.ErrInvalidArgument, t.group, err)}
	}
	if err := cs.RecordCatchUpCommit(ctx, t.group, before.Epoch, digest, superAdmin, s.opts.Clock.Now()); err != nil {
		return true, because(RefusedUnavailable, fmt.Errorf("%w: catch-up of group %x: %w", ports.ErrUnavailable, t.group, err))
	}
	t.state, t.view, t.epoch = pc.Next.State, &pc.Next.View, pc.Next.View.Epoch
	t.advanced, t.commit = true, i
	return true, nil
}

// catchUpOtherEpoch handles a commit in catch-up that is not for the
// state's epoch: one catch-up took already (its id is answered), one that
// conflicts with it, or one past the state (older ones first).
func (s *Service) catchUpOtherEpoch(ctx context.Context, cs ports.CatchUpStore, i int, topic []byte, t *groupTrack, msg, digest []byte, cause error) error {
	_, epoch, _, _ := mlsframe.Peek(msg)
	if !t.advanced && bytes.Equal(t.stored.CommitDigest, digest) {
		return nil // the commit that led to the state, again: the store answers its id
	}
	if epoch >= t.epoch || epoch < t.cu.state.Epoch {
		return refuseCatchUp(i, topic, t, fmt.Errorf("a commit for epoch %d, the group's restored chain is at epoch %d: upload older commits first: %w", epoch, t.epoch, cause))
	}
	taken, adminTaken, ok, err := cs.CatchUpCommit(ctx, t.group, epoch)
	if err != nil {
		return because(RefusedUnavailable, fmt.Errorf("%w: catch-up of group %x: %w", ports.ErrUnavailable, t.group, err))
	}
	if !ok || bytes.Equal(taken, digest) {
		return nil // taken before: the store answers its id
	}
	before, err := s.viewOf(ctx, t)
	if err != nil {
		return err
	}
	_, superAdmin := uploaderOf(before, callerOf(ctx).InstallationKey)
	if adminTaken && !superAdmin {
		return &refusal{reason: RefusedCatchUp, kind: KindName(topic),
			err: fmt.Errorf("envelope %d: %w: group %x: epoch %d's commit was decided by a super admin's chain", i, ports.ErrOtherChain, t.group, epoch)}
	}
	now := s.opts.Clock.Now()
	if err := cs.StopCatchUp(ctx, t.group, now); err != nil {
		return because(RefusedUnavailable, fmt.Errorf("%w: stop catch-up of group %x: %w", ports.ErrUnavailable, t.group, err))
	}
	n, err := notice(t.group, &backendpb.AcceptanceNotice{Outcome: backendpb.AcceptanceNotice_STOPPED, Epoch: epoch}, now)
	if err == nil {
		_, err = s.store.Append(ctx, []ports.NewStoredEnvelope{n})
		s.hub.notify(n.Topic)
	}
	if err != nil {
		return because(RefusedUnavailable, fmt.Errorf("%w: notice of group %x's stopped catch-up: %w", ports.ErrUnavailable, t.group, err))
	}
	t.cu.state.Stopped = true
	return refuseCatchUp(i, topic, t, fmt.Errorf("two different commits uploaded for epoch %d: its catch-up stopped", epoch))
}

// uploaderOf returns the inbox of the member whose leaf holds key in
// view, and whether it is a super admin there; "" when none does.
func uploaderOf(view ports.GroupView, key []byte) (string, bool) {
	if len(key) == 0 {
		return "", false
	}
	for _, m := range view.Members {
		if bytes.Equal(m.SignatureKey, key) {
			r, err := policy.RolesOf(view)
			return m.InboxID, err == nil && r.SuperAdmin(m.InboxID)
		}
	}
	return "", false
}

// inboxCount is the number of distinct inboxes among view's members.
func inboxCount(view ports.GroupView) int {
	seen := map[string]bool{}
	for _, m := range view.Members {
		seen[m.InboxID] = true
	}
	return len(seen)
}

// refuseCatchUp is the refusal of envelope i by t's catch-up.
func refuseCatchUp(i int, topic []byte, t *groupTrack, err error) error {
	return &refusal{reason: RefusedCatchUp, kind: KindName(topic),
		err: fmt.Errorf("envelope %d: %w: group %x: %w", i, ports.ErrCatchUp, t.group, err)}
}
