package delivery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/core/internal/mlsframe"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// Leave requests (ADR-0030 Decision 7, COMP-475 to COMP-479). With commit
// acceptance on and a store that keeps leave records
// ([ports.LeaveStore]), a leave request — a PrivateMessage application
// message whose authenticated data is the one byte of kind leave
// (COMP-184) — published by a member installation of a registered group
// blocks the user who sent it: the service records the inbox's
// installations (its leaves in the group's public state and every
// installation its stored identity updates associate) before it stores
// the request, delivers them none of the group's messages above the
// request's own sequence id, and accepts from them nothing more in the
// group but another leave request; a commit whose committer is a leaf of
// that inbox (an external commit included) is refused too. The records
// of an inbox go once a commit the service accepts leaves it no leaf in
// the group: its removal.

// RefusedLeft is the refusal reason of anything but a leave request
// published in a group by an installation of a user who left it, and of
// a leave request from an installation that is no member of the group.
const RefusedLeft = "left"

func init() { PublicRefusalReasons = append(PublicRefusalReasons, RefusedLeft) }

// isLeaveRequest reports whether msg is a PrivateMessage application
// message whose authenticated data names the kind leave (COMP-184).
func isLeaveRequest(msg []byte) bool {
	ct, ad, ok := mlsframe.PeekPrivate(msg)
	return ok && ct == mlsframe.ContentApplication && len(ad) == 1 && ports.MessageKind(ad[0]) == ports.MessageLeaveRequest
}

// leaveStore returns the store's leave records when the service follows
// public states and the store keeps them; nil otherwise.
func (s *Service) leaveStore() ports.LeaveStore {
	if s.opts.PublicGroups == nil || s.acceptErr != nil {
		return nil
	}
	ls, _ := s.store.(ports.LeaveStore)
	return ls
}

// leavePlan is a leave request of a batch: envelope index and the record
// written for it.
type leavePlan struct {
	index int
	rec   ports.LeaveRecord
}

// checkLeaves refuses the batch when the caller's installation left a
// group it publishes to with anything but a leave request, and returns
// the batch's leave requests of registered groups.
func (s *Service) checkLeaves(ctx context.Context, caller ports.Caller, envs []*backendpb.ClientEnvelope) ([]leavePlan, error) {
	ls := s.leaveStore()
	if ls == nil {
		return nil, nil
	}
	var plans []leavePlan
	for i, env := range envs {
		topic := env.GetTargetTopic()
		kind := ports.TopicKind(topic[0])
		if kind != ports.TopicGroupMessages && kind != ports.TopicGroupInfo {
			continue
		}
		group := topic[1:]
		leave := kind == ports.TopicGroupMessages && isLeaveRequest(env.GetGroupMessage())
		if _, left, err := ls.LeftThrough(ctx, group, caller.InstallationKey); err != nil {
			return nil, because(RefusedUnavailable, fmt.Errorf("envelope %d: %w", i, err))
		} else if left && !leave {
			return nil, &refusal{reason: RefusedLeft, kind: KindName(topic), err: fmt.Errorf(
				"envelope %d: %w: installation %x left group %x: the service accepts nothing more from it there but a leave request",
				i, ports.ErrInvalidArgument, short(caller.InstallationKey), group)}
		}
		if !leave {
			continue
		}
		rec, ok, err := s.leaveRecord(ctx, group, caller.InstallationKey)
		if err != nil {
			return nil, &refusal{reason: reasonOf(err, RefusedLeft), kind: KindName(topic), err: fmt.Errorf("envelope %d: %w", i, err)}
		}
		if ok {
			plans = append(plans, leavePlan{index: i, rec: rec})
		}
	}
	return plans, nil
}

// recordLeaves records the batch's leave requests once every other check
// passed, before the batch is stored, so that no instant exists at which
// a request is stored and its sender still served; a record's Through
// is the topic's end until its request has an id (afterStored).
func (s *Service) recordLeaves(ctx context.Context, plans []leavePlan) error {
	for _, p := range plans {
		if err := s.leaveStore().RecordLeave(ctx, p.rec); err != nil {
			return because(RefusedUnavailable, fmt.Errorf("envelope %d: %w", p.index, err))
		}
	}
	return nil
}

// leaveRecord builds the record of a leave request the installation key
// sends in group; ok is false for a group the service does not follow
// (COMP-373: the request is stored like any message).
func (s *Service) leaveRecord(ctx context.Context, group, key []byte) (ports.LeaveRecord, bool, error) {
	st, err := s.states.PublicState(ctx, group)
	switch {
	case errors.Is(err, ports.ErrNotFound):
		return ports.LeaveRecord{}, false, nil
	case err != nil:
		return ports.LeaveRecord{}, false, because(RefusedUnavailable, err)
	}
	view, err := s.viewer.View(ctx, st.State)
	if err != nil {
		return ports.LeaveRecord{}, false, because(RefusedUnavailable, fmt.Errorf("%w: the stored public state of group %x does not load: %w", ports.ErrUnavailable, group, err))
	}
	i := slices.IndexFunc(view.Members, func(m ports.Member) bool { return bytes.Equal(m.SignatureKey, key) })
	if i < 0 || view.Members[i].InboxID == "" {
		return ports.LeaveRecord{}, false, fmt.Errorf("%w: leave request from installation %x, which is no member of group %x",
			ports.ErrInvalidArgument, short(key), group)
	}
	inbox := view.Members[i].InboxID
	rec := ports.LeaveRecord{GroupID: group, InboxID: inbox}
	for _, m := range view.Members {
		if m.InboxID == inbox {
			rec.InstallationKeys = append(rec.InstallationKeys, m.SignatureKey)
		}
	}
	keys, err := s.installationsOf(ctx, inbox)
	if err != nil {
		return ports.LeaveRecord{}, false, because(RefusedUnavailable, err)
	}
	for _, k := range keys {
		if !slices.ContainsFunc(rec.InstallationKeys, func(x []byte) bool { return bytes.Equal(x, k) }) {
			rec.InstallationKeys = append(rec.InstallationKeys, k)
		}
	}
	if rec.Through, err = s.store.Highest(ctx, append([]byte{byte(ports.TopicGroupMessages)}, group...)); err != nil {
		return ports.LeaveRecord{}, false, because(RefusedUnavailable, err)
	}
	return rec, true, nil
}

// leftCommit refuses a commit whose committer is a leaf of an inbox that
// left the group (an external commit's joiner included).
func (s *Service) leftCommit(ctx context.Context, group []byte, committer string) error {
	ls := s.leaveStore()
	if ls == nil || committer == "" {
		return nil
	}
	left, err := ls.LeftInboxes(ctx, group)
	if err != nil {
		return because(RefusedUnavailable, err)
	}
	if slices.Contains(left, committer) {
		return &refusal{reason: RefusedLeft, kind: KindName([]byte{byte(ports.TopicGroupMessages)}), err: fmt.Errorf(
			"%w: commit by %s, who left group %x: the service accepts nothing more from it there", ports.ErrInvalidArgument, committer, group)}
	}
	return nil
}

// afterStored finishes the batch's leave requests, each record's Through
// now the request's own id, and drops the records of every inbox a
// stored commit left without a leaf. The batch is stored whatever
// happens here: a failure leaves the sender blocked at the older Through
// (its other installations do not read the request itself), and the
// records of a removed inbox go with the group's next accepted commit.
func (s *Service) afterStored(ctx context.Context, plans []leavePlan, ids []uint64, advances []ports.PublicStateAdvance) {
	ls := s.leaveStore()
	if ls == nil {
		return
	}
	for _, p := range plans {
		p.rec.Through = ids[p.index]
		_ = ls.RecordLeave(ctx, p.rec)
	}
	for _, a := range advances {
		if a.State == nil {
			continue
		}
		left, err := ls.LeftInboxes(ctx, a.GroupID)
		if err != nil || len(left) == 0 {
			continue
		}
		view, err := s.viewer.View(ctx, a.State)
		if err != nil {
			continue
		}
		for _, inbox := range left {
			if !slices.ContainsFunc(view.Members, func(m ports.Member) bool { return m.InboxID == inbox }) {
				_ = ls.ForgetLeave(ctx, a.GroupID, inbox) // retried by the group's next commit
			}
		}
	}
}

// leftThrough returns how far the caller may read a group's message
// topic: ok is false when no leave record limits it.
func (s *Service) leftThrough(ctx context.Context, caller ports.Caller, topic []byte) (through uint64, ok bool, err error) {
	ls := s.leaveStore()
	if ls == nil || len(topic) < 2 || ports.TopicKind(topic[0]) != ports.TopicGroupMessages || !caller.Authenticated() {
		return 0, false, nil
	}
	return ls.LeftThrough(ctx, topic[1:], caller.InstallationKey)
}

// cutLeft drops from a page read for the caller the envelopes above its
// leave record's Through; it returns the page, the sizes and the stored
// bytes it dropped, and whether it dropped any.
func cutLeft(page []*backendpb.OriginatorEnvelope, sizes []int64, through uint64) ([]*backendpb.OriginatorEnvelope, []int64, int64, bool) {
	n := len(page)
	for n > 0 && page[n-1].GetSequenceId() > through {
		n--
	}
	var dropped int64
	if sizes != nil {
		for _, sz := range sizes[n:] {
			dropped += sz
		}
		sizes = sizes[:n]
	}
	return page[:n], sizes, dropped, n < len(page)
}

// leftPage is cutLeft for a page read for the caller on topic.
func (s *Service) leftPage(ctx context.Context, caller ports.Caller, topic []byte, page []*backendpb.OriginatorEnvelope) ([]*backendpb.OriginatorEnvelope, error) {
	through, left, err := s.leftThrough(ctx, caller, topic)
	if err != nil || !left {
		return page, err
	}
	page, _, _, _ = cutLeft(page, nil, through)
	return page, nil
}
