package delivery

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// Blocked installations (ADR-0030 amendment 2026-10-26, rule 2, COMP-500
// to COMP-503). A counting refusal with reason credential, by an
// installation of the joining inbox, of a pending resync or recovery
// join drops it and blocks only the joining installation in the group:
//
//   - the decision stores the block ([ports.AcceptanceDecision.Block])
//     with a DROPPED and a BLOCKED notice (installation_key, inbox_id)
//     on the group's topic, in one transaction; the inbox is not
//     quarantined;
//   - the service then accepts nothing from that installation on the
//     group's topic and its GroupInfo topic: a publish whose
//     authenticated connection is the installation's, or a commit whose
//     sender leaf carries its key, is refused with [ports.ErrBlocked]
//     (COMP-501); reads are not refused (COMP-502);
//   - a super admin lifts it ([Service.Lift] with an installation key:
//     a LIFTED notice), or a commit that takes the installation's leaf
//     out of the group ends it (COMP-503).
//
// The store must be a [ports.BlockStore]; with one that is not, such a
// refusal quarantines the committer's inbox as Decision 5 says.

// RefusedBlocked is the refusal reason of a message from a blocked
// installation.
const RefusedBlocked = "blocked"

// EventBlocked is the acceptance event of a block.
const EventBlocked = "blocked"

// blockStore returns the store's blocks, nil when it keeps none.
func (s *Service) blockStore() ports.BlockStore {
	b, _ := s.acc.(ports.BlockStore)
	return b
}

// blockFor returns the installation the drop of the pending commit p
// blocks: p is a resync or recovery join, and a counting refusal with
// reason credential among reports is by an installation of the joining
// inbox. The joining installation is the joining inbox's leaf of the
// state after p whose encryption key no leaf of the current state has
// (an external commit's UpdatePath gives the joiner's leaf a fresh one
// and changes no other). It returns nil when p blocks nobody.
func (s *Service) blockFor(ctx context.Context, p ports.PendingCommit, reports []ports.AcceptanceReport, nowNS int64) (*ports.BlockedInstallation, error) {
	if !p.External || s.blockStore() == nil {
		return nil, nil
	}
	if !slices.ContainsFunc(reports, func(r ports.AcceptanceReport) bool {
		return r.Counts && r.Verdict == ports.VerdictRefused && r.Reason == ports.ReportCredential && r.InboxID == p.Committer
	}) {
		return nil, nil
	}
	cur, err := s.states.PublicState(ctx, p.GroupID)
	if err != nil {
		return nil, err
	}
	before, err := s.viewState(ctx, p.GroupID, cur.State)
	if err != nil {
		return nil, err
	}
	after, err := s.viewState(ctx, p.GroupID, p.State)
	if err != nil {
		return nil, err
	}
	key := joiningKey(before, after, p.Committer)
	if key == nil {
		return nil, nil
	}
	return &ports.BlockedInstallation{GroupID: p.GroupID, InstallationKey: key, InboxID: p.Committer, CommitSeq: p.CommitSeq, SinceNS: nowNS}, nil
}

// joiningKey returns the installation key of the leaf of inbox in after
// whose encryption key no leaf of before has.
func joiningKey(before, after ports.GroupView, inbox string) []byte {
	for _, m := range after.Members {
		if m.InboxID != inbox {
			continue
		}
		if !slices.ContainsFunc(before.Members, func(b ports.Member) bool { return bytes.Equal(b.EncryptionKey, m.EncryptionKey) }) {
			return m.SignatureKey
		}
	}
	return nil
}

// blockedKeys returns the installation keys blocked in the group.
func (s *Service) blockedKeys(ctx context.Context, group []byte) ([][]byte, error) {
	bs := s.blockStore()
	if !s.twoPhase() || bs == nil {
		return nil, nil
	}
	got, err := bs.Blocked(ctx, group)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(got))
	for i, b := range got {
		out[i] = b.InstallationKey
	}
	return out, nil
}

func containsKey(keys [][]byte, k []byte) bool {
	return slices.ContainsFunc(keys, func(x []byte) bool { return bytes.Equal(x, k) })
}

// admitBlocked refuses the batch when its connection's installation is
// blocked in the group of an envelope on a group or GroupInfo topic
// (COMP-501).
func (s *Service) admitBlocked(ctx context.Context, caller ports.Caller, envs []*backendpb.ClientEnvelope) error {
	if !s.twoPhase() || s.blockStore() == nil {
		return nil
	}
	seen := map[string]bool{}
	for i, env := range envs {
		topic := env.GetTargetTopic()
		if k := ports.TopicKind(topic[0]); k != ports.TopicGroupMessages && k != ports.TopicGroupInfo {
			continue
		}
		group := topic[1:]
		blocked, ok := seen[string(group)]
		if !ok {
			keys, err := s.blockedKeys(ctx, group)
			if err != nil {
				return because(RefusedUnavailable, fmt.Errorf("envelope %d: %w", i, err))
			}
			blocked = containsKey(keys, caller.InstallationKey)
			seen[string(group)] = blocked
		}
		if blocked {
			return &refusal{reason: RefusedBlocked, kind: KindName(topic),
				err: fmt.Errorf("envelope %d: %w: group %x: installation %x", i, ports.ErrBlocked, group, short(caller.InstallationKey))}
		}
	}
	return nil
}

// blockedSender refuses a commit whose sender leaf is a blocked
// installation's, and returns the blocks the commit ends: those whose
// key has a leaf in before and none in next.
func blockedSender(i int, topic []byte, t *groupTrack, before ports.GroupView, pc ports.PublicCommit) ([][]byte, error) {
	if containsKey(t.blocked, pc.Sender.SignatureKey) {
		return nil, &refusal{reason: RefusedBlocked, kind: KindName(topic),
			err: fmt.Errorf("envelope %d: %w: group %x: the commit's sender installation %x", i, ports.ErrBlocked, t.group, short(pc.Sender.SignatureKey))}
	}
	return leftBlocked(t.blocked, before, pc.Next.View), nil
}

// leftBlocked returns the keys of blocked that have a leaf in before and
// none in next.
func leftBlocked(blocked [][]byte, before, next ports.GroupView) [][]byte {
	var out [][]byte
	for _, k := range blocked {
		_, was := leafInbox(before, k)
		_, is := leafInbox(next, k)
		if was && !is {
			out = append(out, k)
		}
	}
	return out
}

// leftBlockedByPending returns the blocks the group's pending commit
// with state ends when it is confirmed.
func (s *Service) leftBlockedByPending(ctx context.Context, group, state []byte) ([][]byte, error) {
	blocked, err := s.blockedKeys(ctx, group)
	if err != nil || len(blocked) == 0 {
		return nil, err
	}
	cur, err := s.states.PublicState(ctx, group)
	if err != nil {
		return nil, err
	}
	before, err := s.viewState(ctx, group, cur.State)
	if err != nil {
		return nil, err
	}
	next, err := s.viewState(ctx, group, state)
	if err != nil {
		return nil, err
	}
	return leftBlocked(blocked, before, next), nil
}

// liftBlock ends an installation's block on a super admin's lift, with a
// LIFTED notice naming the installation.
func (s *Service) liftBlock(ctx context.Context, l ports.Lift) error {
	bs := s.blockStore()
	if bs == nil {
		return fmt.Errorf("%w: installation %x is not blocked in group %x", ports.ErrNotFound, short(l.InstallationKey), l.GroupID)
	}
	ns, err := notices(l.GroupID, s.opts.Clock.Now(), &backendpb.AcceptanceNotice{Outcome: backendpb.AcceptanceNotice_LIFTED,
		InstallationKey: l.InstallationKey})
	if err != nil {
		return err
	}
	n, err := bs.Unblock(ctx, l.GroupID, [][]byte{l.InstallationKey}, ns)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%w: installation %x is not blocked in group %x", ports.ErrNotFound, short(l.InstallationKey), l.GroupID)
	}
	s.event(EventLifted)
	s.notifyGroup(l.GroupID)
	return nil
}

// Blocked returns the installations blocked in the group (for operators
// and tests); nil when two phases are off or the store keeps no blocks.
func (s *Service) Blocked(ctx context.Context, group []byte) ([]ports.BlockedInstallation, error) {
	bs := s.blockStore()
	if !s.twoPhase() || bs == nil {
		return nil, nil
	}
	return bs.Blocked(ctx, group)
}
