package identity

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/regroup-mls/regroup/ports"
)

// listHeld returns every update the cache holds for each inbox: with one
// ListMany when the cache implements [ports.IdentityCacheBatch]
// (COMP-587), with one List per inbox otherwise.
func listHeld(ctx context.Context, c ports.IdentityCache, inboxIDs []string) ([][]ports.IdentityUpdateRecord, error) {
	if b, ok := c.(ports.IdentityCacheBatch); ok {
		reads, err := b.ListMany(ctx, inboxIDs)
		if err != nil {
			return nil, err
		}
		if len(reads) != len(inboxIDs) {
			return nil, fmt.Errorf("identity cache: ListMany returned %d lists for %d inboxes", len(reads), len(inboxIDs))
		}
		return reads, nil
	}
	reads := make([][]ports.IdentityUpdateRecord, len(inboxIDs))
	for i, id := range inboxIDs {
		var err error
		if reads[i], err = c.List(ctx, id, math.MaxInt64); err != nil {
			return nil, err
		}
	}
	return reads, nil
}

// storeAll stores the pending inboxes' fetched records and returns what
// each inbox now holds beyond what it held: its fetched records, or,
// for an inbox the store already held another record at one of their
// sequence ids, everything the store holds for it. With a cache that
// implements [ports.IdentityCacheBatch] (COMP-587) that is one PutMany
// of every record and one ListMany of the inboxes to read again;
// otherwise one Put per record, an inbox's stopping at its first record
// not inserted, and one List per inbox to read again.
func storeAll(ctx context.Context, c ports.IdentityCache, pending []*inboxWork) ([][]ports.IdentityUpdateRecord, error) {
	reads := make([][]ports.IdentityUpdateRecord, len(pending))
	for i, w := range pending {
		reads[i] = w.fetched
	}
	b, ok := c.(ports.IdentityCacheBatch)
	if !ok {
		return reads, storeEach(ctx, c, pending, reads)
	}
	var recs []ports.IdentityUpdateRecord
	for _, w := range pending {
		recs = append(recs, w.fetched...)
	}
	if len(recs) == 0 {
		return reads, nil
	}
	inserted, err := b.PutMany(ctx, recs)
	if err != nil {
		return nil, fmt.Errorf("store identity updates: %w", err)
	}
	if len(inserted) != len(recs) {
		return nil, fmt.Errorf("store identity updates: PutMany answered %d of %d records", len(inserted), len(recs))
	}
	var again []int // the pending inboxes to read again
	var ids []string
	for i, w := range pending {
		mine := inserted[:len(w.fetched)]
		inserted = inserted[len(w.fetched):]
		if slices.Contains(mine, false) {
			again, ids = append(again, i), append(ids, w.inboxID)
		}
	}
	if len(again) == 0 {
		return reads, nil
	}
	lists, err := listHeld(ctx, c, ids)
	if err != nil {
		return nil, err
	}
	for k, i := range again {
		reads[i] = lists[k]
	}
	return reads, nil
}

// storeEach is storeAll's fallback: one Put per record.
func storeEach(ctx context.Context, c ports.IdentityCache, pending []*inboxWork, reads [][]ports.IdentityUpdateRecord) error {
	for i, w := range pending {
		for _, rec := range w.fetched {
			inserted, err := c.Put(ctx, rec)
			if err != nil {
				return fmt.Errorf("store identity updates of %s: %w", w.inboxID, err)
			}
			if !inserted {
				if reads[i], err = c.List(ctx, w.inboxID, math.MaxInt64); err != nil {
					return err
				}
				break
			}
		}
	}
	return nil
}
