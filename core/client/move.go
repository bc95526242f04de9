package client

import (
	"context"
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/core/policy"
	"github.com/regroup-mls/regroup/ports"
)

// Moving to a new group (ADR-0030 Decision 6's last resort, COMP-483 and
// COMP-484): a super admin creates a successor group with the members it
// chooses, then points the old group to it with the successor component
// (0x8012). Every member that merges the pointer reports a
// [SuccessorEvent]; [Conversation.Successor] reads it.

// SuccessorEvent reports a merged commit that pointed the conversation
// GroupID to its successor group.
type SuccessorEvent struct {
	GroupID          []byte
	CommitSequenceID uint64
	Successor        []byte
}

func (SuccessorEvent) event() {}

// MoveToNewGroup creates a successor group with opts (this installation's
// user its creator and only super admin, opts.Members the members it
// chooses) and points this group to it. Only a super admin of a group
// may ([ErrNotPermitted], before anything is created). When the successor
// is created but the pointer's commit fails, both are returned: the
// successor exists and [Conversation.SetSuccessor] points to it later.
func (cv *Conversation) MoveToNewGroup(ctx context.Context, opts GroupOptions) (*Conversation, error) {
	view, err := cv.view(ctx)
	if err != nil {
		return nil, fmt.Errorf("move: %w", err)
	}
	r, err := policy.RolesOf(view)
	if err != nil {
		return nil, fmt.Errorf("move: %w", err)
	}
	if err := r.MayChange(metadata.ComponentSuccessor, cv.c.InboxID()); err != nil {
		return nil, fmt.Errorf("move: %w: %v", ErrNotPermitted, err)
	}
	next, err := cv.c.CreateGroup(ctx, opts)
	if next == nil {
		return nil, fmt.Errorf("move: successor: %w", err)
	}
	if err != nil {
		return next, fmt.Errorf("move: successor %x: %w", next.id, err)
	}
	if err := cv.SetSuccessor(ctx, next.id); err != nil {
		return next, fmt.Errorf("move: %w", err)
	}
	return next, nil
}

// SetSuccessor points the group to its successor group, groupID (16 or 32
// bytes), in one commit; super admins of a group may.
func (cv *Conversation) SetSuccessor(ctx context.Context, groupID []byte) error {
	if len(groupID) != 16 && len(groupID) != 32 {
		return fmt.Errorf("set successor: %w: group id of %d bytes", ports.ErrInvalidArgument, len(groupID))
	}
	err := cv.updateMetadata(ctx, func(d metadata.Dictionary, r policy.Roles) (metadata.Dictionary, error) {
		if err := r.MayChange(metadata.ComponentSuccessor, cv.c.InboxID()); err != nil {
			return d, fmt.Errorf("%w: %v", ErrNotPermitted, err)
		}
		return d.Set(metadata.ComponentSuccessor, slices.Clone(groupID)), nil
	})
	if err != nil {
		return fmt.Errorf("set successor: %w", err)
	}
	return nil
}

// Successor returns the group id this group points to as its successor,
// nil when it points to none. A malformed pointer wraps
// [metadata.ErrMalformed].
func (cv *Conversation) Successor(ctx context.Context) ([]byte, error) {
	view, err := cv.view(ctx)
	if err != nil {
		return nil, err
	}
	d, err := metadata.FromExtensions(view.Extensions)
	if err != nil {
		return nil, err
	}
	id, _, err := d.Successor()
	return id, err
}

// successorEvents reports the successor a merged commit set.
func successorEvents(groupID []byte, seq uint64, after ports.GroupView, ch policy.Change) []Event {
	if !slices.Contains(ch.Components, metadata.ComponentSuccessor) {
		return nil
	}
	d, err := metadata.FromExtensions(after.Extensions)
	if err != nil {
		return nil
	}
	if id, ok, err := d.Successor(); ok && err == nil {
		return []Event{SuccessorEvent{GroupID: groupID, CommitSequenceID: seq, Successor: id}}
	}
	return nil
}
