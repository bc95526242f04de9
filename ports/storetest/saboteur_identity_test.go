package storetest_test

import (
	"context"
	"slices"

	"github.com/regroup-mls/regroup/ports"
)

// sabIdentityBatch is the identity cache of the identity-batch-*
// saboteurs, the only ones whose cache keeps ports.IdentityCacheBatch:
// each breaks one promise of ListMany or PutMany.
type sabIdentityBatch struct {
	sabIdentity
	b ports.IdentityCacheBatch
}

// ListMany of identity-batch-list-sorted answers in the order of the
// inbox ids, as a query ordered by inbox whose rows are handed out in
// turn would, not in the caller's order.
func (c sabIdentityBatch) ListMany(ctx context.Context, inboxIDs []string) ([][]ports.IdentityUpdateRecord, error) {
	if c.rule == "identity-batch-list-sorted" {
		inboxIDs = slices.Sorted(slices.Values(inboxIDs))
	}
	return c.b.ListMany(ctx, inboxIDs)
}

// PutMany of identity-batch-put-all-inserted reports every record
// inserted, as a store counting rows per call rather than per record
// might.
func (c sabIdentityBatch) PutMany(ctx context.Context, recs []ports.IdentityUpdateRecord) ([]bool, error) {
	ins, err := c.b.PutMany(ctx, recs)
	if c.rule == "identity-batch-put-all-inserted" {
		for i := range ins {
			ins[i] = true
		}
	}
	return ins, err
}
