package delivery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/core/policy"
	"github.com/regroup-mls/regroup/ports"
)

// A group whose catch-up stopped (COMP-494) takes one commit more: the
// pointer to its successor group (COMP-520). Its owners repair it by a
// move to a new group (amendment rule 4, COMP-484), and the members on
// the chain the service holds learn of the move from that pointer, a
// change of the group context they authenticate. The group stays stopped
// after it: every other commit, a second pointer included, is refused
// with [ports.ErrCatchUp].

// stoppedCommit decides envelope i, a commit to t's group whose catch-up
// stopped: taken only when it is the group's first pointer to a
// successor, committed by a super admin of the state's epoch (whoever
// publishes it), and changing nothing but the successor component.
func (s *Service) stoppedCommit(ctx context.Context, i int, topic []byte, t *groupTrack, msg, digest []byte) error {
	refuse := func(why string) error {
		return refuseCatchUp(i, topic, t, fmt.Errorf("its catch-up stopped on conflicting uploads; it takes only a super admin's pointer to its successor: %s", why))
	}
	pc, err := guarded(func() (ports.PublicCommit, error) { return s.opts.PublicGroups.Apply(ctx, t.state, msg) })
	if err != nil {
		if ports.RefusalReason(err) == "" {
			return refusePublic(i, topic, err) // the validator failed on its own: unavailable
		}
		if ports.RefusalReason(err) == ports.RefusedEpoch && !t.advanced && bytes.Equal(t.stored.CommitDigest, digest) {
			return nil // the pointer again, published twice: the store answers its id
		}
		return refuse(fmt.Sprintf("not a commit of the chain it holds (%v)", err))
	}
	before, err := s.viewOf(ctx, t)
	if err != nil {
		return err
	}
	if why := pointerOnly(before, pc); why != "" {
		return refuse(why)
	}
	if err := s.admitCommitPolicy(ctx, before, pc); err != nil {
		if errors.Is(err, ports.ErrUnavailable) && !errors.Is(err, policy.ErrNotPermitted) {
			return because(RefusedUnavailable, fmt.Errorf("envelope %d: commit to group %x: %w", i, t.group, err))
		}
		return &refusal{reason: policyReason(err), kind: KindName(topic),
			err: fmt.Errorf("envelope %d: %w: commit to group %x refused by the role policy: %w", i, ports.ErrInvalidArgument, t.group, err)}
	}
	t.state, t.view, t.epoch = pc.Next.State, &pc.Next.View, pc.Next.View.Epoch
	t.advanced, t.commit = true, i
	return nil
}

// pointerOnly returns why pc is not a stopped group's pointer to its
// successor; "" when it is.
func pointerOnly(before ports.GroupView, pc ports.PublicCommit) string {
	if pc.SenderType != ports.SenderMember {
		return "an external commit"
	}
	if _, superAdmin := uploaderOf(before, pc.Sender.SignatureKey); !superAdmin {
		return "its committer is no super admin"
	}
	d, err := metadata.FromExtensions(before.Extensions)
	if err != nil {
		return fmt.Sprintf("the group's metadata: %v", err)
	}
	if _, ok, _ := d.Successor(); ok {
		return "it points to a successor already"
	}
	for _, p := range pc.Proposals {
		if p.Type != ports.ProposalGroupContextExtensions {
			return fmt.Sprintf("a proposal of type %d", p.Type)
		}
	}
	ch, err := policy.Diff(before, pc.Next.View, pc.Proposals)
	if err != nil {
		return err.Error()
	}
	if len(ch.Added)+len(ch.Removed)+len(ch.Readded)+len(ch.AddedInboxes)+len(ch.RemovedInboxes)+len(ch.AddedSuperAdmins) > 0 ||
		ch.OtherExtensions || !slices.Equal(ch.Components, []uint16{metadata.ComponentSuccessor}) {
		return "it changes more than the successor component"
	}
	after, err := metadata.FromExtensions(pc.Next.View.Extensions)
	if err != nil {
		return fmt.Sprintf("its metadata: %v", err)
	}
	if _, ok, err := after.Successor(); !ok || err != nil {
		return "it sets no well-formed successor"
	}
	return ""
}
