package commitlog

import (
	"context"
	"fmt"
	"math"

	"github.com/regroup-mls/regroup/ports"
)

// maxStorable is the highest value a store holds in an unsigned column
// (2^63−1): SQL integers are signed 64-bit.
const maxStorable = math.MaxInt64

// maxAuthenticator bounds an entry's epoch authenticators: an epoch
// authenticator is one hash output (RFC 9420 §8), at most 64 bytes in any
// cipher suite.
const maxAuthenticator = 64

// bound is the highest envelope sequence id a pass evaluates (COMP-099):
// the highest of what the commit-log topic reports as its newest (API-244)
// and the last envelope the client processed on the group's own topic,
// which share one counter (COMP-041), never above what a store holds.
func (l *Log) bound(ctx context.Context, keys Keys, g ports.Group) (uint64, error) {
	h, err := l.opts.Transport.HighestSequenceID(ctx, keys.Topic)
	if err != nil {
		return 0, fmt.Errorf("read commit log: highest sequence id: %w", err)
	}
	return min(max(h, g.Cursor), maxStorable), nil
}

// rewind moves a read position that is above the pass's bound back
// (COMP-100): accepted entries above the bound are withdrawn, the position
// becomes the envelope of the last accepted entry left, and the fork state
// is recomputed from what remains (forked stays forked, FORK-041). It
// returns the new position and the fork state.
func (l *Log) rewind(ctx context.Context, groupID []byte, bound uint64) (uint64, ports.ForkState, error) {
	var (
		pos   uint64
		state ports.ForkState
		event *ForkEvent
	)
	err := l.opts.Store.Tx(ctx, func(tx ports.Tx) error {
		event = nil
		g, err := tx.Groups().Get(ctx, groupID)
		if err != nil {
			return err
		}
		var removed int
		if pos, removed, err = tx.RemoteCommitLog().Rewind(ctx, groupID, bound); err != nil {
			return err
		}
		t, err := track(ctx, tx, g, removed > 0)
		if err != nil {
			return err
		}
		state, event, err = t.finish(ctx)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("read commit log: rewind: %w", err)
	}
	l.notify(event)
	return pos, state, nil
}
