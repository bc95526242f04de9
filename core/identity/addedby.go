package identity

import (
	"context"
	"fmt"
	"math"

	"github.com/regroup-mls/regroup/ports"
)

// Associations returns [Associations] over the updates of the inbox the
// resolver holds, through the highest (without fetching, like
// [Resolver.Newest]). It returns an error wrapping [ports.ErrNotFound]
// when none is held.
func (r *Resolver) Associations(ctx context.Context, inboxID string) ([]Association, error) {
	recs, highest, err := r.held(ctx, inboxID)
	if err != nil {
		return nil, fmt.Errorf("installations of %s: %w", inboxID, err)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("installations of %s: %w: no update held", inboxID, ports.ErrNotFound)
	}
	return Associations(inboxID, recs, highest), nil
}

// held returns the inbox's held records and the highest sequence id.
func (r *Resolver) held(ctx context.Context, inboxID string) ([]ports.IdentityUpdateRecord, uint64, error) {
	var recs []ports.IdentityUpdateRecord
	var highest uint64
	err := r.opts.Store.Tx(ctx, func(tx ports.Tx) error {
		var err error
		if recs, err = tx.IdentityCache().List(ctx, inboxID, math.MaxInt64); err != nil {
			return err
		}
		highest, err = tx.IdentityCache().Highest(ctx, inboxID)
		return err
	})
	return recs, highest, err
}

// AddedBy returns [AddedBy] over the updates of the inbox the resolver
// holds (without fetching: [Resolver.Sync] first to see the topic's end):
// the installations the inbox associates now that authorizer authorised,
// directly or through another.
func (r *Resolver) AddedBy(ctx context.Context, inboxID string, authorizer []byte) ([][]byte, error) {
	recs, highest, err := r.held(ctx, inboxID)
	if err != nil {
		return nil, fmt.Errorf("installations added by %x: %w", authorizer, err)
	}
	return AddedBy(inboxID, recs, highest, authorizer), nil
}
