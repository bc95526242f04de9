package storetest

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// benchIdentityCache times what resolving the identities of a Welcome of
// 1,000 members (500 inboxes) asks of the identity cache: one
// transaction reading the 500 inboxes, none held yet, and one storing two
// updates of each of them. Each iteration does it twice, on inboxes new
// to the store: with one List per inbox and one Put per update (the
// reference, per-inbox-ns), and with one ListMany and one PutMany
// ([ports.IdentityCacheBatch], batch-ns); ns/op is their sum and
// x-per-inbox the batch's time over the reference's.
func benchIdentityCache(b *testing.B, h Harness) {
	const inboxes = 500
	s := open(b, h)
	var has bool
	must(b, s, func(ctx context.Context, tx ports.Tx) error {
		_, has = tx.IdentityCache().(ports.IdentityCacheBatch)
		return nil
	})
	if !has {
		b.Skip("the store's IdentityCache does not implement ports.IdentityCacheBatch (optional)")
	}
	update := bytes.Repeat([]byte{0x5a}, 300) // about an add's encoding
	var spent [2]time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for mode := range 2 {
			ids := make([]string, inboxes)
			var recs []ports.IdentityUpdateRecord
			for k := range ids {
				ids[k] = fmt.Sprintf("bench-%d-%d-%03d", i, mode, k)
				for q := range 2 {
					recs = append(recs, ports.IdentityUpdateRecord{InboxID: ids[k], SequenceID: uint64(1000*k + q + 1), Update: update})
				}
			}
			start := time.Now()
			must(b, s, func(ctx context.Context, tx ports.Tx) error {
				return identityRead(ctx, tx.IdentityCache(), ids, mode == 1)
			})
			must(b, s, func(ctx context.Context, tx ports.Tx) error {
				return identityWrite(ctx, tx.IdentityCache(), recs, mode == 1)
			})
			spent[mode] += time.Since(start)
		}
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
	b.ReportMetric(per(spent[0]), "per-inbox-ns")
	b.ReportMetric(per(spent[1]), "batch-ns")
	b.ReportMetric(per(spent[1])/per(spent[0]), "x-per-inbox")
}

func identityRead(ctx context.Context, c ports.IdentityCache, ids []string, batch bool) error {
	if batch {
		_, err := c.(ports.IdentityCacheBatch).ListMany(ctx, ids)
		return err
	}
	for _, id := range ids {
		if _, err := c.List(ctx, id, math.MaxInt64); err != nil {
			return err
		}
	}
	return nil
}

func identityWrite(ctx context.Context, c ports.IdentityCache, recs []ports.IdentityUpdateRecord, batch bool) error {
	if batch {
		_, err := c.(ports.IdentityCacheBatch).PutMany(ctx, recs)
		return err
	}
	for _, r := range recs {
		if _, err := c.Put(ctx, r); err != nil {
			return err
		}
	}
	return nil
}
