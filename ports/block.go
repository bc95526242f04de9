package ports

import (
	"context"
	"fmt"
)

// ErrBlocked reports a message the delivery service refused because the
// installation that sent it is blocked in the group (ADR-0030 amendment
// 2026-10-26, rule 2).
var ErrBlocked = fmt.Errorf("%w: installation blocked in the group", ErrInvalidArgument)

// BlockedInstallation is one installation blocked in a group: a device of
// the joining inbox refused its resync or recovery join with reason
// credential.
type BlockedInstallation struct {
	GroupID         []byte
	InstallationKey []byte
	// InboxID is the installation's inbox.
	InboxID string
	// CommitSeq is the dropped join's sequence id on the group's topic.
	CommitSeq uint64
	SinceNS   int64
}

// BlockStore is an optional interface of an [AcceptanceStore] that keeps
// the installations blocked per group. [AcceptanceDecision.Block] adds
// one in the decision's transaction.
type BlockStore interface {
	// Blocked returns the installations blocked in the group, in no
	// order.
	Blocked(ctx context.Context, groupID []byte) ([]BlockedInstallation, error)
	// Unblock ends the blocks of these installations in the group and,
	// in the same transaction when it ended at least one, appends the
	// notices. It returns how many blocks it ended.
	Unblock(ctx context.Context, groupID []byte, keys [][]byte, notices []NewStoredEnvelope) (int, error)
}
