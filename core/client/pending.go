package client

import (
	"context"

	"fmt"
	"time"

	"github.com/regroup-mls/regroup/proto/backendpb"
)

// newestConfirmedGroupInfo returns the newest GroupInfo envelope of the
// group without the pending mark, or an error wrapping [ErrNoGroupInfo].
func (c *Client) newestConfirmedGroupInfo(ctx context.Context, groupID []byte) (*backendpb.OriginatorEnvelope, error) {
	var best *backendpb.OriginatorEnvelope
	for after := uint64(0); ; {
		envs, err := c.deps.Transport.Query(ctx, groupInfoTopic(groupID), after, pageSize)
		if err != nil {
			return nil, fmt.Errorf("group info of %x: %w", groupID, err)
		}
		moved := false
		for _, e := range envs {
			if e.GetSequenceId() <= after {
				continue
			}
			after, moved = e.GetSequenceId(), true
			if !e.GetPending() {
				best = e
			}
		}
		if !moved {
			break
		}
	}
	if best == nil {
		return nil, fmt.Errorf("group %x: only a pending GroupInfo: %w", groupID, ErrNoGroupInfo)
	}
	return best, nil
}

// awaitExternal waits for the decision on this installation's external
// commit at seq (a resync or recovery join) when the delivery service
// holds it pending: confirmed returns nil, so the caller installs it; a
// drop, expiry or supersession returns an error wrapping
// [ErrCommitDropped] or [ErrCommitLost] (COMP-446). A commit stored
// without the pending mark took effect at once.
func (c *Client) awaitExternal(ctx context.Context, groupID []byte, seq uint64) error {
	delay := 20 * time.Millisecond
	after, pending := seq-1, false
	for {
		envs, err := c.deps.Transport.Query(ctx, groupTopic(groupID), after, pageSize)
		if err != nil {
			return fmt.Errorf("external commit: read group %x: %w", groupID, err)
		}
		for _, e := range envs {
			s := e.GetSequenceId()
			if s <= after {
				continue
			}
			after = s
			if s == seq {
				if pending = e.GetPending(); !pending {
					return nil
				}
				continue
			}
			n := e.GetEnvelope().GetAcceptanceNotice()
			if n == nil || n.GetCommitSequenceId() != seq || !pending {
				continue
			}
			switch n.GetOutcome() {
			case backendpb.AcceptanceNotice_CONFIRMED:
				return nil
			case backendpb.AcceptanceNotice_DROPPED:
				return fmt.Errorf("external commit %d: %w", seq, ErrCommitDropped)
			case backendpb.AcceptanceNotice_EXPIRED, backendpb.AcceptanceNotice_SUPERSEDED:
				return fmt.Errorf("external commit %d %s: %w", seq, outcomeName(n.GetOutcome()), ErrCommitLost)
			}
		}
		if len(envs) > 0 {
			continue
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("external commit %d: %w: %w", seq, ErrCommitAwaiting, ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}
