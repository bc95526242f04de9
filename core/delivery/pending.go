package delivery

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/core/internal/mlsframe"
	"github.com/regroup-mls/regroup/core/policy"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// pendingTrack is what two phases add to a groupTrack.
type pendingTrack struct {
	// pending is the group's stored pending commit, nil when none.
	pending *ports.PendingCommit
	// quarantined lists the group's quarantined inboxes.
	quarantined []string
	// stage makes the batch's commit the group's pending commit.
	stage *ports.PendingAdvance
	// supersede names the pending commit a super admin's commit of the
	// batch discards.
	supersede uint64
	// unquarantine lists the inboxes whose last leaf the batch's
	// one-phase commit removes.
	unquarantine []string
	// republished: the batch repeats the pending commit.
	republished bool
	// blocked lists the group's blocked installations and unblock those
	// whose block the batch's one-phase commit ends (block.go).
	blocked, unblock [][]byte
}

// loadPending reads the group's pending commit and quarantines.
func (s *Service) loadPending(ctx context.Context, t *groupTrack) error {
	if !s.twoPhase() || t.stored == nil {
		return nil
	}
	p, err := s.acc.PendingCommit(ctx, t.group)
	switch {
	case errors.Is(err, ports.ErrNotFound):
	case err != nil:
		return because(RefusedUnavailable, err)
	default:
		t.pending = &p
	}
	if t.quarantined, err = s.acc.Quarantined(ctx, t.group); err != nil {
		return because(RefusedUnavailable, err)
	}
	if t.blocked, err = s.blockedKeys(ctx, t.group); err != nil {
		return because(RefusedUnavailable, err)
	}
	return nil
}

// republishedPending reports whether the commit with digest is the
// group's pending commit published again: the store answers its id
// (its dedup key), and nothing changes.
func (t *groupTrack) republishedPending(digest []byte) bool {
	if t.pending == nil || !bytes.Equal(t.pending.CommitDigest, digest) {
		return false
	}
	t.republished = true
	return true
}

// pendingEpochRefusal turns the validator's epoch refusal of a commit
// into [ports.ErrCommitPending] while the group has a pending commit:
// the commit was built on the pending epoch or raced it, and its sender
// waits for the decision (Decision 2).
func pendingEpochRefusal(i int, topic []byte, t *groupTrack, err error) error {
	if t.pending == nil || ports.RefusalReason(err) != ports.RefusedEpoch {
		return nil
	}
	return refusePending(i, topic, t, fmt.Errorf("the commit is not for the current epoch: %w", err))
}

func refusePending(i int, topic []byte, t *groupTrack, err error) error {
	return &refusal{reason: RefusedCommitPending, kind: KindName(topic),
		err: fmt.Errorf("envelope %d: %w: group %x: commit %d is pending: %w", i, ports.ErrCommitPending, t.group, t.pending.CommitSeq, err)}
}

// phase applies Decisions 1, 2 and 5 to a commit the validator and the
// role policy accepted: a quarantined inbox's commit is refused; a super
// admin's takes effect at once and supersedes the pending one (COMP-411);
// any other becomes the group's pending commit, or is refused with
// [ports.ErrCommitPending] while one pends.
func (s *Service) phase(i int, topic []byte, t *groupTrack, before ports.GroupView, pc ports.PublicCommit) error {
	if !s.twoPhase() {
		return nil
	}
	inbox := pc.Sender.InboxID
	if slices.Contains(t.quarantined, inbox) {
		return &refusal{reason: RefusedQuarantined, kind: KindName(topic),
			err: fmt.Errorf("envelope %d: %w: group %x: inbox %s", i, ports.ErrQuarantined, t.group, inbox)}
	}
	unblock, err := blockedSender(i, topic, t, before, pc) // amendment rule 2
	if err != nil {
		return err
	}
	if t.stage != nil {
		return because(RefusedBatch, fmt.Errorf("envelope %d: %w: a commit that takes two phases is its group's last commit in a batch", i, ports.ErrInvalidArgument))
	}
	if oneStep(before, pc) && !ownerJoinWaits(pc) { // amendment rule 3: ownerjoin.go
		if t.pending != nil {
			t.supersede = t.pending.CommitSeq
		}
		t.unquarantine = notMembers(t.quarantined, pc.Next.View)
		t.unblock = unblock
		return nil
	}
	if t.pending != nil {
		return refusePending(i, topic, t, errors.New("a commit by an inbox that is not a super admin waits for its decision"))
	}
	if t.advanced {
		return because(RefusedBatch, fmt.Errorf("envelope %d: %w: a commit that takes two phases is its group's only commit in a batch", i, ports.ErrInvalidArgument))
	}
	t.stage = &ports.PendingAdvance{Committer: inbox, External: pc.SenderType == ports.SenderNewMemberCommit, CreatedNS: s.opts.Clock.Now().UnixNano()}
	return nil
}

// oneStep reports whether a commit takes effect at once (Decision 1): its
// committer inbox is a super admin in the epoch before it. A group
// without roles (a DM) has no super admin, so every commit takes two
// phases. A super admin's resync or recovery join whose inbox has other
// installations in the group waits for them (amendment rule 3,
// ownerjoin.go).
func oneStep(before ports.GroupView, pc ports.PublicCommit) bool {
	r, err := policy.RolesOf(before)
	if err != nil {
		return false
	}
	return pc.Sender.InboxID != "" && r.SuperAdmin(pc.Sender.InboxID)
}

// finishAdvance adds two phases' part to a group's advance.
func (t *groupTrack) finishAdvance(a *ports.PublicStateAdvance, rows []ports.NewStoredEnvelope, envs []*backendpb.ClientEnvelope, now time.Time) {
	a.Pending, a.Supersede, a.Unquarantine, a.Unblock = t.stage, t.supersede, t.unquarantine, t.unblock
	if t.supersede != 0 {
		a.SupersededNS = now.UnixNano()
	}
	if (t.stage != nil || t.republished) && t.info >= 0 {
		// A pending GroupInfo sent again is stored once.
		d := sha256.Sum256(envs[t.info].GetGroupMessage())
		rows[t.info].DedupKey = d[:]
	}
}

// pendingMessage refuses a message of a group's pending epoch (Decision
// 2: members send for the current and the previous epoch only). groups
// caches the pending epochs read by one batch.
func (s *Service) pendingMessage(ctx context.Context, i int, topic, msg []byte, groups map[string]uint64) error {
	if !s.twoPhase() {
		return nil
	}
	_, epoch, _, ok := mlsframe.Peek(msg)
	if !ok {
		return nil
	}
	group := topic[1:]
	pe, seen := groups[string(group)]
	if !seen {
		p, err := s.acc.PendingCommit(ctx, group)
		switch {
		case errors.Is(err, ports.ErrNotFound):
		case err != nil:
			return because(RefusedUnavailable, err)
		default:
			pe = p.Epoch
		}
		groups[string(group)] = pe
	}
	if pe == 0 || epoch != pe {
		return nil
	}
	return &refusal{reason: RefusedCommitPending, kind: KindName(topic),
		err: fmt.Errorf("envelope %d: %w: group %x: a message of epoch %d, whose commit is pending", i, ports.ErrCommitPending, group, epoch)}
}

// withSupersededNotices places, before each commit that supersedes a
// pending one, the SUPERSEDED notice that discards it (same
// transaction, lower id: readers discard the pending commit before they
// meet the one that won). It returns the rows to store, the advances
// indexed into them, and each envelope's position among the rows.
func withSupersededNotices(rows []ports.NewStoredEnvelope, advances []ports.PublicStateAdvance, now time.Time) ([]ports.NewStoredEnvelope, []ports.PublicStateAdvance, []int, error) {
	before := map[int]ports.NewStoredEnvelope{}
	for _, a := range advances {
		if a.Supersede == 0 || a.Commit < 0 {
			continue
		}
		n, err := notice(a.GroupID, &backendpb.AcceptanceNotice{Outcome: backendpb.AcceptanceNotice_SUPERSEDED,
			CommitSequenceId: a.Supersede, Epoch: a.From}, now)
		if err != nil {
			return nil, nil, nil, err
		}
		before[a.Commit] = n
	}
	pos := make([]int, len(rows))
	if len(before) == 0 {
		for i := range pos {
			pos[i] = i
		}
		return rows, advances, pos, nil
	}
	out := make([]ports.NewStoredEnvelope, 0, len(rows)+len(before))
	for i, r := range rows {
		if n, ok := before[i]; ok {
			out = append(out, n)
		}
		pos[i] = len(out)
		out = append(out, r)
	}
	adv := slices.Clone(advances)
	for k := range adv {
		if adv[k].Commit >= 0 {
			adv[k].Commit = pos[adv[k].Commit]
		}
		if adv[k].GroupInfo >= 0 {
			adv[k].GroupInfo = pos[adv[k].GroupInfo]
		}
	}
	return out, adv, pos, nil
}

// accepted reports the two-phase events of a stored batch.
func (s *Service) accepted(advances []ports.PublicStateAdvance) {
	for _, a := range advances {
		if a.Pending != nil {
			s.event(EventPending)
		}
		if a.Supersede != 0 {
			s.event(EventSuperseded)
			s.notifyGroup(a.GroupID)
		}
	}
}

// republishedInfo admits a GroupInfo sent again with the group's pending
// commit: only the stored pending GroupInfo itself, which the store
// answers with its id.
func (s *Service) republishedInfo(ctx context.Context, i int, topic []byte, t *groupTrack, msg []byte, row *ports.NewStoredEnvelope) error {
	if t.pending.GroupInfoSeq > 0 {
		got, err := s.store.Range(ctx, topic, t.pending.GroupInfoSeq-1, 1, s.opts.MaxPageBytes)
		if err != nil {
			return because(RefusedUnavailable, err)
		}
		if len(got) == 1 && got[0].SequenceID == t.pending.GroupInfoSeq {
			var stored backendpb.ClientEnvelope
			if proto.Unmarshal(got[0].Envelope, &stored) == nil && bytes.Equal(stored.GetGroupMessage(), msg) {
				d := sha256.Sum256(msg)
				row.DedupKey = d[:]
				return nil
			}
		}
	}
	return refusePending(i, topic, t, errors.New("a GroupInfo sent with the pending commit again is not the one stored with it"))
}
