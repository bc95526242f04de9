package delivery

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/core/policy"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// Commit acceptance (COMP-370 to COMP-384). With Options.PublicGroups
// set, the service follows every registered group's public state and
// checks, before it stores a batch:
//
//   - every PublicMessage commit on a group-message topic: applied to the
//     group's state by the validator, then the role policy
//     ([policy.Diff], [policy.Check]) on the views before and after it; a
//     commit that fails is refused with its reason class and nothing of
//     the batch is stored. A commit for another epoch than the state's is
//     refused with an error wrapping [ports.ErrEpochConflict] (the sender
//     catches up and retries), unless it is the very commit that led to
//     the state, published again, which is answered with its stored id;
//   - every GroupInfo on a [ports.TopicGroupInfo] topic: the group's
//     registration when the service holds no state for it ([PublicGroups.Open]),
//     otherwise checked against the state the batch's commits lead to
//     ([PublicGroups.CheckGroupInfo]). The newest accepted one is the only
//     one kept on its topic.
//
// Private messages, proposals and application messages pass as before
// (but a viewer's application messages, viewer.go);
// so do the commits of a group that has not registered (COMP-373).
// The state advance and the envelopes commit in one transaction of a
// [ports.PublicStateStore]; a concurrent commit that advanced the state
// first makes the batch be validated again against the new state.

// Refusal reasons of commit acceptance, as [Observer.Refused] names them:
// "public_" and the validator's reason class ([ports.PublicRefusal]),
// RefusedPolicy for a commit the role policy refuses, and
// RefusedPolicyVersion for a registration or commit whose group states a
// role policy version this build does not know (COMP-381).
const (
	RefusedPolicy        = "public_policy"
	RefusedPolicyVersion = "public_policy_version"
	refusedPublic        = "public_"
)

// PublicRefusalReasons lists every reason commit acceptance refuses with,
// for metrics that report them at zero from the start.
var PublicRefusalReasons = []string{
	refusedPublic + ports.RefusedMalformed, refusedPublic + ports.RefusedEpoch, refusedPublic + ports.RefusedGroup,
	refusedPublic + ports.RefusedSignature, refusedPublic + ports.RefusedSender, refusedPublic + ports.RefusedProposal,
	refusedPublic + ports.RefusedLeafNode, refusedPublic + ports.RefusedParentHash, refusedPublic + ports.RefusedTreeHash,
	refusedPublic + ports.RefusedGroupInfo, RefusedPolicy, RefusedPolicyVersion, RefusedViewerMessage,
	RefusedCatchUp,
}

// maxStateRetries bounds how often a batch is validated again after a
// concurrent commit moved a group's state between its check and its
// transaction.
const maxStateRetries = 4

// groupTrack is one group's public state as a batch advances it.
type groupTrack struct {
	group    []byte
	stored   *ports.StoredPublicState // nil: the store holds none
	state    []byte
	view     *ports.GroupView
	epoch    uint64
	register bool
	advanced bool
	commit   int
	info     int
	cu       catchUpTrack
	pendingTrack
}

// accept checks the batch's commits and GroupInfos against their groups'
// public states and returns the state advances to store with the batch;
// it sets the dedup key of every checked commit in rows.
func (s *Service) accept(ctx context.Context, envs []*backendpb.ClientEnvelope, rows []ports.NewStoredEnvelope) ([]ports.PublicStateAdvance, error) {
	pg := s.opts.PublicGroups
	tracks := map[string]*groupTrack{}
	var order []*groupTrack
	load := func(group []byte) (*groupTrack, error) {
		if t, ok := tracks[string(group)]; ok {
			return t, nil
		}
		t := &groupTrack{group: group, commit: -1, info: -1}
		st, err := s.states.PublicState(ctx, group)
		switch {
		case errors.Is(err, ports.ErrNotFound):
		case err != nil:
			return nil, because(RefusedUnavailable, err)
		default:
			t.stored, t.state, t.epoch = &st, st.State, st.Epoch
		}
		if err := s.loadPending(ctx, t); err != nil {
			return nil, err
		}
		tracks[string(group)] = t
		order = append(order, t)
		return t, nil
	}
	pendingEpochs := map[string]uint64{}
	for i, env := range envs {
		topic := env.GetTargetTopic()
		if ports.TopicKind(topic[0]) != ports.TopicGroupMessages {
			continue
		}
		msg := env.GetGroupMessage()
		if h, ok := peekFrame(msg); !ok || h.wireFormat != wirePublicMessage || h.contentType != contentCommit {
			if err := s.pendingMessage(ctx, i, topic, msg, pendingEpochs); err != nil {
				return nil, err
			}
			continue
		}
		t, err := load(topic[1:])
		if err != nil {
			return nil, err
		}
		if t.stored == nil && !t.register {
			continue // COMP-373: an unregistered group's commits pass unchecked
		}
		digest := sha256.Sum256(msg)
		rows[i].DedupKey = digest[:]
		if handled, err := s.catchUpCommit(ctx, i, topic, t, msg, digest[:]); err != nil {
			return nil, err
		} else if handled {
			continue
		}
		if t.republishedPending(digest[:]) {
			continue // the pending commit again: the store answers its id
		}
		pc, err := guarded(func() (ports.PublicCommit, error) { return pg.Apply(ctx, t.state, msg) })
		if err != nil {
			if ports.RefusalReason(err) == ports.RefusedEpoch && !t.advanced && t.stored != nil &&
				bytes.Equal(t.stored.CommitDigest, digest[:]) {
				continue // the commit that led to the state, again: the store answers its id
			}
			if err := pendingEpochRefusal(i, topic, t, err); err != nil {
				return nil, err
			}
			return nil, refusePublic(i, topic, err)
		}
		before, err := s.viewOf(ctx, t)
		if err != nil {
			return nil, err
		}
		if err := s.refuseRevoked(ctx, i, topic, t, before, pc); err != nil { // revoked.go
			return nil, err
		}
		if err := s.admitCommitPolicy(ctx, before, pc); err != nil {
			if errors.Is(err, ports.ErrUnavailable) && !errors.Is(err, policy.ErrNotPermitted) {
				return nil, because(RefusedUnavailable, fmt.Errorf("envelope %d: commit to group %x: %w", i, t.group, err))
			}
			return nil, &refusal{reason: policyReason(err), kind: KindName(topic),
				err: fmt.Errorf("envelope %d: %w: commit to group %x refused by the role policy: %w", i, ports.ErrInvalidArgument, t.group, err)}
		}
		if err := s.leftCommit(ctx, t.group, pc.Sender.InboxID); err != nil { // leave.go
			return nil, fmt.Errorf("envelope %d: %w", i, err)
		}
		if err := s.phase(i, topic, t, before, pc); err != nil {
			return nil, err
		}
		t.state, t.view, t.epoch = pc.Next.State, &pc.Next.View, pc.Next.View.Epoch
		t.advanced, t.commit = true, i
	}
	for i, env := range envs {
		topic := env.GetTargetTopic()
		if ports.TopicKind(topic[0]) != ports.TopicGroupInfo {
			continue
		}
		msg := env.GetGroupMessage()
		t, err := load(topic[1:])
		if err != nil {
			return nil, err
		}
		if t.republished {
			if err := s.republishedInfo(ctx, i, topic, t, msg, &rows[i]); err != nil {
				return nil, err
			}
			continue
		}
		if t.stored == nil && !t.register {
			ps, err := guarded(func() (ports.PublicState, error) { return pg.Open(ctx, msg) })
			if err != nil {
				return nil, refusePublic(i, topic, err)
			}
			if !bytes.Equal(ps.View.GroupID, t.group) {
				return nil, refusePublic(i, topic, &ports.PublicRefusal{Reason: ports.RefusedGroup,
					Err: fmt.Errorf("the GroupInfo is of group %x, not of its topic's", ps.View.GroupID)})
			}
			if _, err := policy.VersionOf(ps.View); err != nil {
				return nil, &refusal{reason: policyReason(err), kind: KindName(topic),
					err: fmt.Errorf("envelope %d: %w: registration of group %x refused by the role policy: %w", i, ports.ErrInvalidArgument, t.group, err)}
			}
			t.register, t.state, t.view, t.epoch = true, ps.State, &ps.View, ps.View.Epoch
		} else if _, err := guarded(func() (struct{}, error) { return struct{}{}, pg.CheckGroupInfo(ctx, t.state, msg) }); err != nil {
			return nil, refusePublic(i, topic, err)
		}
		t.info = i
	}
	var adv []ports.PublicStateAdvance
	for _, t := range order {
		if !t.register && !t.advanced && t.info < 0 {
			continue
		}
		a := ports.PublicStateAdvance{GroupID: t.group, Register: t.register, Epoch: t.epoch, Commit: t.commit, GroupInfo: t.info}
		if t.stored != nil {
			a.From, a.FromCommitSeq = t.stored.Epoch, t.stored.CommitSeq
		}
		if t.register || t.advanced {
			a.State = t.state
		}
		t.finishAdvance(&a, rows, envs, s.opts.Clock.Now())
		adv = append(adv, a)
	}
	return adv, nil
}

// guarded runs a validator call on bytes a publisher chose: a panic in
// it refuses the message as malformed instead of ending the service.
func guarded[T any](f func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &ports.PublicRefusal{Reason: ports.RefusedMalformed, Err: fmt.Errorf("the validator failed on it: %v", r)}
		}
	}()
	return f()
}

// viewOf returns the group view of t's state before its next commit.
func (s *Service) viewOf(ctx context.Context, t *groupTrack) (ports.GroupView, error) {
	if t.view != nil {
		return *t.view, nil
	}
	v, err := s.viewer.View(ctx, t.state)
	if err != nil {
		return ports.GroupView{}, because(RefusedUnavailable, fmt.Errorf("%w: the stored public state of group %x does not load: %w", ports.ErrUnavailable, t.group, err))
	}
	t.view = &v
	return v, nil
}

// admitCommitPolicy applies the role policy to a commit the validator
// accepted: a member's commit by [policy.Diff] and [policy.Check] on the
// views before and after it, an external commit by [policy.External]
// (COMP-375): exactly the resyncs and recovery joins, the joiner's
// association read from the inbox's identity updates this service stores.
func (s *Service) admitCommitPolicy(ctx context.Context, before ports.GroupView, pc ports.PublicCommit) error {
	if pc.SenderType == ports.SenderNewMemberCommit {
		_, err := policy.External(policy.Commit{Before: before, After: pc.Next.View, Sender: pc.Sender, SenderType: pc.SenderType,
			Proposals: pc.Proposals}, s.associated(ctx))
		return err
	}
	ch, err := policy.Diff(before, pc.Next.View, pc.Proposals)
	if err != nil {
		return err
	}
	return policy.Check(policy.Commit{Before: before, After: pc.Next.View, Sender: pc.Sender, SenderType: pc.SenderType,
		Proposals: pc.Proposals}, ch)
}

// policyReason is the refusal reason of a role policy error: a group
// state of a role policy version this build does not know is refused
// apart (COMP-381), since its members may well accept the commit by
// rules regroupd lacks; every other violation is [RefusedPolicy].
func policyReason(err error) string {
	if errors.Is(err, policy.ErrUnknownVersion) {
		return RefusedPolicyVersion
	}
	return RefusedPolicy
}

// refusePublic turns a validator's refusal of envelope i into the
// service's: an epoch refusal wraps [ports.ErrEpochConflict], any other
// [ports.ErrInvalidArgument]; both name the reason class.
func refusePublic(i int, topic []byte, err error) error {
	group := topic[1:]
	reason := ports.RefusalReason(err)
	if reason == "" {
		// Not a refusal: the validator failed on its own.
		return because(RefusedUnavailable, fmt.Errorf("envelope %d: %w: public validation of group %x failed: %w", i, ports.ErrUnavailable, group, err))
	}
	class := ports.ErrInvalidArgument
	if reason == ports.RefusedEpoch {
		class = ports.ErrEpochConflict
	}
	return &refusal{reason: refusedPublic + reason, kind: KindName(topic),
		err: fmt.Errorf("envelope %d: %w: group %x: %w", i, class, group, err)}
}
