package client

import (
	"context"
	"errors"
	"fmt"

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
	if _, err := c.commitAs(ctx, cv.id, cv.addBuilder(targets, nil, cands), welcomesStrict); err != nil {
		// Nothing processes a one-shot group again: its intent goes.
		if derr := c.dropIntent(ctx, cv.id, true, nil); derr != nil {
			c.logErr("drop one-shot intent", derr)
		}
		var we *welcomeError
		if errors.As(err, &we) && (we.sent || !(errors.Is(err, ports.ErrInvalidArgument) || errors.Is(err, ports.ErrRateLimited))) {
			return cv.id, fmt.Errorf("send one-shot: %w", err)
		}
		return cv.id, fmt.Errorf("send one-shot: %w: %w", recovery.ErrNotSent, err)
	}
	return cv.id, nil
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

func (h recoveryHost) CatchUp(ctx context.Context, groupID []byte) error {
	return h.c.catchUp(ctx, groupID)
}

func (h recoveryHost) Commit(ctx context.Context, groupID []byte, build recovery.Build) (uint64, error) {
	return h.c.commitAs(ctx, groupID, builder(build), welcomesDelivered)
}

func (h recoveryHost) SendOneshot(ctx context.Context, msg *contentspb.OneshotMessage, inboxes ...string) ([]byte, error) {
	return h.c.SendOneshot(ctx, msg, inboxes...)
}
