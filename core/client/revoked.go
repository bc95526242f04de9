package client

import (
	"context"
	"fmt"

	"github.com/regroup-mls/regroup/ports"
)

// ownJoinRevoked reports whether p is a resync or recovery join by this
// inbox whose joining installation the inbox's identity state, as this
// installation holds it, does not associate — a device the user revoked
// (ADR-0030 amendment 2026-10-26, rule 2, COMP-508). Its witness refuses
// it with reason credential, which makes the delivery service drop the
// join and block that installation, not quarantine the inbox. The
// state is this installation's: when the delivery service's list is
// stale, the revocation this installation made or read is still in it.
func (c *Client) ownJoinRevoked(ctx context.Context, tx ports.Tx, p ports.Processed) (bool, error) {
	if p.SenderType != ports.SenderNewMemberCommit || p.Sender.InboxID != c.InboxID() {
		return false, nil
	}
	ok, err := c.associatedIn(ctx, tx)(c.InboxID(), p.Sender.SignatureKey)
	return err == nil && !ok, err
}

// RemoveInstallations commits the removal of the leaves of these
// installations of this inbox — a device the user revoked, say, which a
// refusal left blocked in the group (COMP-508). Installations with no
// leaf are skipped; with none left it does nothing. The role policy lets
// any member remove its own inbox's installations.
func (cv *Conversation) RemoveInstallations(ctx context.Context, keys ...[]byte) error {
	if err := cv.removeInstallations(ctx, keys); err != nil {
		return fmt.Errorf("remove installations: %w", err)
	}
	return nil
}
