package client

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/regroup-mls/regroup/core/policy"
	"github.com/regroup-mls/regroup/ports"
)

// Leaving a group (ADR-0030 Decision 7, COMP-475 to COMP-479). A member
// leaves with a leave request: an application message of kind leave
// (COMP-184) whose content is empty. Every member accepts one from any
// role, a viewer's included, and discards a message of that kind that
// carries anything; a super admin's client then commits the removal of
// the user's installations and roles by itself. The delivery service,
// reading the kind in the authenticated data, stops serving the user's
// installations at the request.

var (
	// ErrLastSuperAdmin is returned by [Conversation.Leave] for the only
	// super admin of a group: every commit leaves the group at least
	// one, so another member must be made one first.
	ErrLastSuperAdmin = errors.New("the last super admin cannot leave before making another member one")
	// ErrLeft is returned by a send in a conversation this user left.
	ErrLeft = errors.New("conversation left")
)

// LeaveRequestEvent reports a leave request read from a group's topic:
// InboxID asks to leave. Own is set when the inbox is this client's, a
// request sent by another installation of the same user; the
// conversation is then left here too ([Conversation.Left]).
type LeaveRequestEvent struct {
	GroupID    []byte
	SequenceID uint64
	InboxID    string
	Own        bool
}

func (LeaveRequestEvent) event() {}

const (
	// nsLeft holds the conversations this user left: hex group id →
	// the leave request's sequence id (8 bytes, 0 while unconfirmed).
	nsLeft = "client.left"
	// nsLeavers holds the removals a super admin's client owes: hex
	// group id "/" inbox → nothing.
	nsLeavers = "client.leavers"
)

// Leave sends this user's leave request to the group. The delivery
// service then serves none of the group's later messages to any of the
// user's installations, and a super admin's client removes them. The
// group's only super admin gets [ErrLastSuperAdmin]; a DM or one-shot
// group cannot be left this way ([ErrNotPermitted]). Sending the request
// again is harmless.
func (cv *Conversation) Leave(ctx context.Context) error {
	if err := cv.Sync(ctx); err != nil && !errors.Is(err, ports.ErrUnavailable) {
		return fmt.Errorf("leave: %w", err)
	}
	view, err := cv.view(ctx)
	if err != nil {
		return fmt.Errorf("leave: %w", err)
	}
	r, err := policy.RolesOf(view)
	if err != nil {
		return fmt.Errorf("leave: %w", err)
	}
	me := cv.c.InboxID()
	switch {
	case r.ConversationType != ports.ConversationGroup:
		return fmt.Errorf("leave: %w: only a group is left by a leave request", ErrNotPermitted)
	case r.SuperAdmin(me) && len(without(r.SuperAdmins, []string{me})) == 0:
		return fmt.Errorf("leave: %w", ErrLastSuperAdmin)
	}
	seq, err := cv.send(ctx, ports.MessageLeaveRequest, nil)
	if err != nil {
		return fmt.Errorf("leave: %w", err)
	}
	return cv.c.tx(ctx, func(ctx context.Context, tx ports.Tx) error { return markLeft(ctx, tx, cv.id, seq) })
}

// Left reports whether this user left the conversation: a leave request
// of its inbox was sent from, or read by, this installation.
func (cv *Conversation) Left(ctx context.Context) (left bool, err error) {
	err = cv.c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		left, err = isLeft(ctx, tx, cv.id)
		return err
	})
	return left, err
}

func markLeft(ctx context.Context, tx ports.Tx, groupID []byte, seq uint64) error {
	return tx.Blobs().Put(ctx, nsLeft, hex.EncodeToString(groupID), binary.BigEndian.AppendUint64(nil, seq))
}

func isLeft(ctx context.Context, tx ports.Tx, groupID []byte) (bool, error) {
	_, err := tx.Blobs().Get(ctx, nsLeft, hex.EncodeToString(groupID))
	if errors.Is(err, ports.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// receivedLeave handles a leave request the engine authenticated: one
// that carries content is discarded; otherwise it is stored like any
// message, and either marks the conversation left (this user's own) or,
// when this installation is a super admin in the state it was read in,
// owes the sender's removal. It reports whether to store it.
func (c *Client) receivedLeave(ctx context.Context, tx ports.Tx, g ports.Group, seq uint64, before ports.GroupView, p ports.Processed, out *outcome) (bool, error) {
	if len(p.Application) != 0 {
		c.logger.Warn("message discarded", "group", fmt.Sprintf("%x", g.ID), "seq", seq,
			"reason", "a leave request carries no content")
		return false, nil
	}
	inbox := p.Sender.InboxID
	own := inbox == c.InboxID()
	out.events = append(out.events, LeaveRequestEvent{GroupID: g.ID, SequenceID: seq, InboxID: inbox, Own: own})
	if own {
		return true, markLeft(ctx, tx, g.ID, seq)
	}
	if r, err := policy.RolesOf(before); err == nil && r.SuperAdmin(c.InboxID()) {
		if err := tx.Blobs().Put(ctx, nsLeavers, hex.EncodeToString(g.ID)+"/"+inbox, []byte{1}); err != nil {
			return false, err
		}
	}
	return true, nil
}

// removeLeavers commits the removals this super admin's client owes: for
// each member whose leave request it read, the removal of every
// installation and role of the inbox. A removal another super admin
// committed first, or one this client may no longer make, is dropped; one
// that failed otherwise is tried again at the next sync.
func (c *Client) removeLeavers(ctx context.Context) error {
	var keys []string
	if err := c.tx(ctx, func(ctx context.Context, tx ports.Tx) (err error) {
		keys, err = tx.Blobs().Keys(ctx, nsLeavers, "")
		return err
	}); err != nil {
		return err
	}
	var errs []error
	for _, k := range keys {
		gidHex, inbox, _ := strings.Cut(k, "/")
		gid, err := hex.DecodeString(gidHex)
		if err == nil {
			var cv *Conversation
			if cv, err = c.Conversation(ctx, gid); err == nil {
				err = cv.RemoveMembers(ctx, inbox)
			}
		}
		if err != nil && !errors.Is(err, ports.ErrNotFound) && !errors.Is(err, ErrNotPermitted) &&
			!errors.Is(err, ErrInactiveConversation) && !errors.Is(err, ports.ErrInvalidArgument) {
			errs = append(errs, fmt.Errorf("remove %s after its leave request: %w", inbox, err))
			continue
		}
		errs = append(errs, c.tx(ctx, func(ctx context.Context, tx ports.Tx) error { return tx.Blobs().Delete(ctx, nsLeavers, k) }))
	}
	return errors.Join(errs...)
}
