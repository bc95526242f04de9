package delivery

import (
	"bytes"
	"context"

	"github.com/regroup-mls/regroup/core/policy"
	"github.com/regroup-mls/regroup/ports"
)

// Owners' joins (ADR-0030 amendment 2026-10-26, rule 3, COMP-504 to
// COMP-507). A super admin's resync or recovery join takes effect at
// once (Decision 1) only when the joining inbox has no other
// installation in the group: no leaf of the inbox in the state after the
// join but the joiner's. Otherwise it becomes the group's pending commit
// like any two-phase commit, with three differences:
//
//   - only the reports of the inbox's other installations count
//     (witness, reports.go): their refusal drops it (a credential
//     refusal blocks the joining installation, block.go), and the end of
//     the grace period after their first report confirms it; the
//     joining installation's own report and every other inbox's are
//     kept without counting;
//   - without a counting report it is confirmed, not expired, when
//     TwoPhaseOptions.OwnerJoinLimit after its acceptance ends;
//   - the service tells an owner's join from another pending commit by
//     its committer: an external commit whose committer is a super admin
//     in the current state only pends under this rule, and the current
//     state does not change while a commit pends.
//
// A lost installation of the inbox still has a leaf, so a recovery
// that leaves other lost leaves of its inbox in the group waits for the
// limit (COMP-506).

// ownerJoinWaits reports whether the super admin's commit pc waits for
// the joining inbox's other installations: it is an external commit and
// the state after it holds another leaf of the committer's inbox.
func ownerJoinWaits(pc ports.PublicCommit) bool {
	if pc.SenderType != ports.SenderNewMemberCommit {
		return false
	}
	for _, m := range pc.Next.View.Members {
		if m.InboxID == pc.Sender.InboxID && m.LeafIndex != pc.Sender.LeafIndex {
			return true
		}
	}
	return false
}

// isOwnerJoin reports whether the pending commit p, on the current state
// before, is a super admin's join waiting under rule 3.
func isOwnerJoin(before ports.GroupView, p ports.PendingCommit) bool {
	if !p.External {
		return false
	}
	r, err := policy.RolesOf(before)
	return err == nil && r.SuperAdmin(p.Committer)
}

// ownerJoinCounts reports whether the report of the installation key,
// of inbox, counts on an owner's join: it is of the joining inbox and
// not the joining installation itself.
func ownerJoinCounts(before, after ports.GroupView, p ports.PendingCommit, inbox string, key []byte) bool {
	return inbox == p.Committer && !bytes.Equal(key, joiningKey(before, after, p.Committer))
}

// ownerJoinPending reports whether the group's pending commit p is an
// owner's join waiting under rule 3.
func (s *Service) ownerJoinPending(ctx context.Context, p ports.PendingCommit) (bool, error) {
	if !p.External {
		return false, nil
	}
	cur, err := s.states.PublicState(ctx, p.GroupID)
	if err != nil {
		return false, err
	}
	before, err := s.viewState(ctx, p.GroupID, cur.State)
	if err != nil {
		return false, err
	}
	return isOwnerJoin(before, p), nil
}
