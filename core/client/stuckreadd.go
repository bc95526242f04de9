package client

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"

	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/ports"
)

// An owner's re-add of a stuck installation (ADR-0030 Decision 6,
// COMP-452, COMP-453): a super admin's client removes the installation's
// leaf and adds its newest valid key package in one commit; the stuck
// installation takes that commit's Welcome in place of the state it can
// no longer move.

// Readd re-adds an installation of the conversation with its newest valid
// key package, in one commit that removes its leaf and adds it back
// (FORK-062's readd commit, on this installation's own initiative): the
// repair an owner applies to a device a [StuckReportEvent] names
// (InstallationKey). It needs this installation to be a permitted
// readder (a super admin of a group, a member of a DM); it raises the
// group's minimum protocol version first (FORK-063), and refuses a key
// package that fails JOIN-007, JOIN-008 or JOIN-082. It returns the
// commit's sequence id. Errors wrap recovery.ErrReaddRefused (not
// permitted, or no such leaf), keypackage.ErrRejected or ports.ErrNotFound
// (no usable key package), or recovery.ErrWelcomeNotStored (committed;
// the Welcome is published again until stored).
func (cv *Conversation) Readd(ctx context.Context, installationKey []byte) (uint64, error) {
	seq, err := cv.c.rec.Readd(ctx, cv.id, installationKey)
	if err != nil {
		return seq, fmt.Errorf("readd: %w", err)
	}
	return seq, nil
}

// replaceStuck is the join pipeline's ReplaceStuck (COMP-453): a Welcome
// may replace the active state of a group or DM that holds a stuck
// record — a confirmed commit this installation could not process, at or
// below the stored cursor — when the Welcome's adder, other than this
// installation, is a leaf of the held state whose inbox that state names
// a permitted readder. The receiver adds the rest: a later epoch than the
// held one, and the topic processed up to the Welcome's anchor (JOIN-043,
// JOIN-092).
func (c *Client) replaceStuck(ctx context.Context, tx ports.Tx, g ports.Group, held ports.GroupView, adder ports.Member) (bool, error) {
	if !held.Active || (g.ConversationType != ports.ConversationGroup && g.ConversationType != ports.ConversationDM) {
		return false, nil
	}
	var s stuckRecord
	found, err := getJSON(ctx, tx, nsStuck, g.ID, &s)
	if err != nil || !found || s.Seq > g.Cursor || s.Seq < g.JoinAnchor {
		return false, err
	}
	if bytes.Equal(adder.SignatureKey, []byte(c.deps.Installation.PublicKey())) {
		return false, nil
	}
	var inbox string
	for _, m := range held.Members {
		if bytes.Equal(m.SignatureKey, adder.SignatureKey) {
			inbox = m.InboxID
		}
	}
	if inbox == "" {
		return false, nil
	}
	permitted, err := commitlog.MetadataRoles{}.Publishers(g.ConversationType, held)
	if err != nil {
		return false, nil // no readder can be named in a state whose metadata does not decode
	}
	return permitted[inbox], nil
}

// stuckEnded deletes the stuck record of a group that a Welcome anchored
// after the stuck commit (an owner's re-add) or a removal ended, and for
// a re-add applies the quarantine notices between the stuck commit and
// the Welcome's anchor, which the stuck state never processed (COMP-449,
// COMP-453).
func (c *Client) stuckEnded(ctx context.Context, groupID []byte, seq uint64, g ports.Group) error {
	var qs []quarantineNotice
	if g.Active && g.JoinAnchor > seq {
		var err error
		if qs, err = c.quarantineNotices(ctx, groupID, seq, g.JoinAnchor); err != nil {
			c.logger.Warn("quarantine notices before the re-add not read", "group", fmt.Sprintf("%x", groupID), "err", err)
		}
	}
	return c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		for _, q := range qs {
			if err := updateQuarantine(ctx, tx, groupID, q.inbox, q.lifted); err != nil {
				return err
			}
		}
		return tx.Blobs().Delete(ctx, nsStuck, hex.EncodeToString(groupID))
	})
}
