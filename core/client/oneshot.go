package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/core/recovery"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// SendOneshot creates a one-shot group (conversation type 4) whose
// ONESHOT_MESSAGE is msg, with this installation as its creator and only
// super admin, and adds in one commit the given inboxes and this inbox's
// other installations, each with every installation whose key package is
// valid: their installations receive msg in the commit's Welcome
// (FORK-050, COMP-200). An inbox none of whose installations has a valid
// key package is left out. The group is never listed (FORK-052), no
// application message is ever sent in it, and nothing processes its
// topic after this commit. It returns the one-shot group's id.
//
// A failure after which no recipient can hold the Welcome wraps
// [recovery.ErrNotSent]: there was nobody to send to, the commit never
// merged, or the delivery service refused or rate-limited the Welcomes
// before it stored any of them. Any other failure leaves the outcome
// unknown.
func (c *Client) SendOneshot(ctx context.Context, msg *contentspb.OneshotMessage, inboxes ...string) ([]byte, error) {
	if msg.GetMessageType() == nil {
		return nil, fmt.Errorf("send one-shot: %w: %w: the message names no kind", recovery.ErrNotSent, ports.ErrInvalidArgument)
	}
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("send one-shot: %w: %w", recovery.ErrNotSent, err)
	}
	targets, cands, err := c.oneshotCandidates(ctx, inboxes)
	if err != nil {
		return nil, fmt.Errorf("send one-shot: %w: %w", recovery.ErrNotSent, err)
	}
	d := metadata.Dictionary{}.
		Set(metadata.ComponentConversationType, metadata.EncodeConversationType(ports.ConversationOneshot)).
		Set(metadata.ComponentSuperAdminList, metadata.EncodeInboxList([]string{c.InboxID()})).
		Set(metadata.ComponentOneshotMessage, data)
	cv, err := c.create(ctx, ports.ConversationOneshot, "", d)
	if err != nil {
		return nil, fmt.Errorf("send one-shot: %w: %w", recovery.ErrNotSent, err)
	}
	c.sendingOneshots.Store(string(cv.id), true)
	defer c.sendingOneshots.Delete(string(cv.id))
	if _, err := c.commitAs(ctx, cv.id, cv.addBuilder(targets, nil, cands), welcomesStrict); err != nil {
		if errors.Is(err, recovery.ErrWelcomeNotStored) {
			// Merged, its Welcomes in the outbox until stored (COMP-270).
			return cv.id, fmt.Errorf("send one-shot: %w", err)
		}
		// Nothing processes a one-shot group again: its intent goes.
		if derr := c.dropIntent(ctx, cv.id, true, nil); derr != nil {
			c.logErr("drop one-shot intent", derr)
		}
		if unknownWelcomes(err) {
			return cv.id, fmt.Errorf("send one-shot: %w", err)
		}
		return cv.id, fmt.Errorf("send one-shot: %w: %w", recovery.ErrNotSent, err)
	}
	return cv.id, nil
}

// resumeOneshot settles the commit intent of a one-shot group whose
// sending stopped with the process that ran it (COMP-275): the commit is
// published again with the same bytes, read back and merged, and its
// Welcomes are published or kept in the Welcome outbox (COMP-270). When
// it ends reaching nobody — the commit lost, refused or rejected, or its
// Welcomes refused before any was stored — the intent goes and, for a
// readd request, the recovery clears its mark so the request is sent
// again (FORK-051). An unknown outcome keeps the intent for the next
// sync. Nothing is listed or streamed (FORK-052).
func (c *Client) resumeOneshot(ctx context.Context, id []byte) error {
	if _, busy := c.sendingOneshots.Load(string(id)); busy {
		return nil // this process is sending it
	}
	defer c.lock(id)()
	if in, err := c.intent(ctx, id); err != nil || in == nil {
		return err // settled since the sync read it
	}
	_, done, err := c.driveIntent(ctx, id)
	var we *welcomeError
	switch {
	case errors.Is(err, ErrNotPermitted):
		// Rejected: the intent is gone, nobody applies the commit.
	case done && (err == nil || errors.Is(err, recovery.ErrWelcomeNotStored)):
		return nil // sent, or kept until stored
	case err == nil, errors.Is(err, ports.ErrInvalidArgument) && !errors.As(err, &we):
		// Lost or refused: the intent is gone, nothing was stored.
	case errors.As(err, &we) && !unknownWelcomes(err):
		if derr := c.dropIntent(ctx, id, false, nil); derr != nil {
			return errors.Join(err, derr)
		}
	default:
		return fmt.Errorf("resume one-shot %x: %w", id, err)
	}
	c.logger.Warn("one-shot group reached nobody", "group", fmt.Sprintf("%x", id), "err", err)
	var msg *contentspb.OneshotMessage
	rerr := c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		view, err := c.deps.MLS.Group(ctx, tx, id)
		if err != nil {
			return err
		}
		d, err := metadata.FromExtensions(view.Extensions)
		if err != nil {
			return err
		}
		msg, err = d.OneshotMessage()
		return err
	})
	if rerr != nil {
		return fmt.Errorf("resume one-shot %x: its message: %w", id, rerr)
	}
	if req := msg.GetReaddRequest(); req != nil {
		if err := c.rec.NotSent(ctx, req.GetGroupId()); err != nil {
			return fmt.Errorf("resume one-shot %x: %w", id, err)
		}
		c.recovery.ask()
	}
	return nil
}

// OneshotState implements [recovery.OneshotResumer]: it reads every
// one-shot group created at or after since whose message is a readd
// request for groupID.
func (h recoveryHost) OneshotState(ctx context.Context, groupID []byte, since time.Time) (pending, committed bool, err error) {
	c := h.c
	ct := ports.ConversationOneshot
	err = c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		pending, committed = false, false
		gs, err := tx.Groups().List(ctx, ports.GroupFilter{ConversationType: &ct})
		if err != nil {
			return err
		}
		for _, g := range gs {
			// A second's slack for a store that keeps times coarsely; an
			// earlier request's group is RetryDelay older.
			if g.CreatedAt.Before(since.Add(-time.Second)) {
				continue
			}
			view, err := c.deps.MLS.Group(ctx, tx, g.ID)
			if err != nil {
				return err
			}
			d, err := metadata.FromExtensions(view.Extensions)
			if err != nil {
				return err
			}
			msg, err := d.OneshotMessage()
			if err != nil || !bytes.Equal(msg.GetReaddRequest().GetGroupId(), groupID) {
				continue
			}
			in, err := loadIntent(ctx, tx, g.ID)
			if err != nil {
				return err
			}
			pending = pending || in != nil
			committed = committed || view.Epoch > 0
		}
		return nil
	})
	return pending, committed, err
}

// unknownWelcomes reports a failed publish of a merged commit's Welcomes
// after which a recipient may hold one: an earlier batch was stored, or
// the delivery service neither refused nor rate-limited them, so it may
// have stored them before the answer was lost. A one-shot group's
// Welcomes in that state go to the Welcome outbox (COMP-270).
func unknownWelcomes(err error) bool {
	var we *welcomeError
	return errors.As(err, &we) && (we.sent || !(errors.Is(err, ports.ErrInvalidArgument) || errors.Is(err, ports.ErrRateLimited)))
}

// oneshotCandidates resolves the recipients of a one-shot group: each
// inbox given, and this inbox when it has other installations. An inbox
// without a usable installation is left out; none left at all is an
// error wrapping [ErrNoInstallations].
func (c *Client) oneshotCandidates(ctx context.Context, inboxes []string) ([]string, []candidate, error) {
	own, err := c.ownAssociation(ctx)
	if err != nil {
		return nil, nil, err
	}
	targets := withoutInbox(dedupe(inboxes), c.InboxID())
	if len(own.InstallationKeys) > 1 {
		targets = append(targets, c.InboxID())
	}
	present := map[string]bool{string(c.InstallationKey()): true}
	var kept []string
	var cands []candidate
	usable := 0
	for _, inbox := range targets {
		cd, err := c.resolveForAdd(ctx, []string{inbox}, present)
		if errors.Is(err, ErrNoInstallations) || errors.Is(err, ports.ErrNotFound) {
			c.logger.Info("one-shot recipient left out", "inbox", inbox, "reason", err)
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		for _, v := range cd[0].packages.Usable {
			if !present[string(v.InstallationKey)] {
				usable++
			}
		}
		kept, cands = append(kept, inbox), append(cands, cd...)
	}
	if usable == 0 {
		return nil, nil, fmt.Errorf("%w: no recipient of the one-shot group can be added", ErrNoInstallations)
	}
	return kept, cands, nil
}

// recoveryHost is what the recovery reaches the client through
// ([recovery.Host]).
type recoveryHost struct{ c *Client }

func (h recoveryHost) CatchUp(ctx context.Context, groupID []byte) (uint64, error) {
	if err := h.c.catchUp(ctx, groupID); err != nil {
		return 0, err
	}
	return h.c.tails.ReadTo(string(groupID)), nil
}

func (h recoveryHost) Commit(ctx context.Context, groupID []byte, build recovery.Build) (uint64, error) {
	return h.c.commitAs(ctx, groupID, builder(build), welcomesDelivered)
}

func (h recoveryHost) SendOneshot(ctx context.Context, msg *contentspb.OneshotMessage, inboxes ...string) ([]byte, error) {
	return h.c.SendOneshot(ctx, msg, inboxes...)
}
