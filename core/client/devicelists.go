package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/identitypb"
)

// Device lists first (ADR-0030 amendment 2026-10-26, rule 1; COMP-509 to
// COMP-519). Before a catch-up upload of a group's merged commits, the
// client publishes the identity updates it holds for its own inbox and
// for every inbox with a leaf in the group, oldest first per inbox: a
// delivery service restored from a backup older than a revocation then
// holds the revocation before it checks the commits, resyncs and
// recovery joins the revoked installation signs. The service stores an
// update once and answers a copy with the stored id, so publishing what
// it already holds costs a publish and changes nothing.

// deviceListBatch bounds the identity updates of one publish.
const deviceListBatch = 64

// uploadDeviceLists publishes the identity updates this installation
// holds for its inbox and the inboxes of the group's members. A refused
// batch (an update the service does not take, a quota) is skipped; an
// unavailable service ends the upload with its error.
func (c *Client) uploadDeviceLists(ctx context.Context, groupID []byte) error {
	inboxes := []string{c.InboxID()}
	held := map[string][]ports.IdentityUpdateRecord{}
	if err := c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		v, err := c.deps.MLS.Group(ctx, tx, groupID)
		if err != nil && !errors.Is(err, ports.ErrNotFound) && !errors.Is(err, ports.ErrGroupNotFound) {
			return err
		}
		var others []string
		for _, m := range v.Members {
			if m.InboxID != c.InboxID() && !slices.Contains(others, m.InboxID) {
				others = append(others, m.InboxID)
			}
		}
		slices.Sort(others)
		inboxes = append(inboxes, others...)
		for _, inbox := range inboxes {
			recs, err := tx.IdentityCache().List(ctx, inbox, math.MaxInt64)
			if err != nil && !errors.Is(err, ports.ErrNotFound) {
				return err
			}
			held[inbox] = recs
		}
		return nil
	}); err != nil {
		return fmt.Errorf("device lists of group %x: %w", groupID, err)
	}
	for _, inbox := range inboxes {
		topic, err := identityTopic(inbox)
		if err != nil {
			continue
		}
		var envs []*backendpb.ClientEnvelope
		for _, r := range held[inbox] {
			var u identitypb.IdentityUpdate
			if proto.Unmarshal(r.Update, &u) != nil || u.GetInboxId() != inbox {
				continue
			}
			envs = append(envs, &backendpb.ClientEnvelope{TargetTopic: topic,
				Payload: &backendpb.ClientEnvelope_IdentityUpdate{IdentityUpdate: &u}})
		}
		for len(envs) > 0 {
			n := min(len(envs), deviceListBatch)
			_, err := c.deps.Transport.Publish(ctx, envs[:n])
			switch {
			case err == nil:
			case errors.Is(err, ports.ErrInvalidArgument), errors.Is(err, ports.ErrRateLimited):
				c.logger.Debug("device list not taken in catch-up", "inbox", inbox, "err", err)
			default:
				return fmt.Errorf("device list of %s: %w", inbox, err)
			}
			envs = envs[n:]
		}
	}
	return nil
}
