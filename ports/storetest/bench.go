package storetest

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// RawInserter is implemented by a harness that can measure the raw insert
// cost of the database under its store, the reference [Bench] prints each
// figure next to.
type RawInserter interface {
	// RawInsert inserts one new small row into a scratch table of the
	// database s stands on, in a transaction of its own, without going
	// through s's repositories (for example with database/sql).
	RawInsert(ctx context.Context, s ports.Store) error
}

// Bench runs the storage benchmarks against stores made by newHarness:
//
//   - RawInsert: the reference, one plain insert per transaction;
//   - LocalAppend: one local commit-log entry appended per transaction;
//   - LocalRangeRead: 100 entries read in Seq order from a 1000-entry log;
//   - ProcessCommit: the transaction of processing one commit, a 16 KiB
//     MLS state blob Put, a local entry Append and a cursor Update.
//   - IdentityCache500Inboxes: what resolving the identities of a
//     1,000-member Welcome asks of the identity cache, with and without
//     [ports.IdentityCacheBatch] (see benchIdentityCache).
//
// With a [RawInserter] harness each benchmark also reports raw-insert-ns,
// the raw insert cost on the same database measured in the same loop (one
// raw insert after each operation, outside the timer), and x-raw-insert,
// its own ns/op divided by that.
func Bench(b *testing.B, newHarness func(b *testing.B) Harness) {
	b.Run("RawInsert", func(b *testing.B) {
		h := newHarness(b)
		raw, ok := h.(RawInserter)
		if !ok {
			b.Skip("harness does not implement RawInserter: no reference insert rate")
		}
		s := open(b, h)
		ctx := ctxFor(b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := raw.RawInsert(ctx, s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("LocalAppend", func(b *testing.B) {
		h := newHarness(b)
		s := open(b, h)
		g := gid(1)
		ref := newRawRef(b, h, s)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			must(b, s, func(ctx context.Context, tx ports.Tx) error {
				_, _, err := tx.LocalCommitLog().Append(ctx, localEntry(g, 1, uint64(i+1)))
				return err
			})
			ref.sample()
		}
		ref.report()
	})
	b.Run("LocalRangeRead", func(b *testing.B) {
		h := newHarness(b)
		s := open(b, h)
		g := gid(2)
		const logLen, page = 1000, 100
		must(b, s, func(ctx context.Context, tx ports.Tx) error {
			for i := 0; i < logLen; i++ {
				if _, _, err := tx.LocalCommitLog().Append(ctx, localEntry(g, 1, uint64(i+1))); err != nil {
					return err
				}
			}
			return nil
		})
		ref := newRawRef(b, h, s)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			after := uint64((i * page) % (logLen - page))
			must(b, s, func(ctx context.Context, tx ports.Tx) error {
				es, err := tx.LocalCommitLog().List(ctx, g, after, page)
				if err == nil && len(es) != page {
					err = fmt.Errorf("read %d entries, want %d", len(es), page)
				}
				return err
			})
			ref.sample()
		}
		ref.report()
	})
	b.Run("ProcessCommit", func(b *testing.B) {
		h := newHarness(b)
		s := open(b, h)
		g := gid(3)
		must(b, s, func(ctx context.Context, tx ports.Tx) error {
			return tx.Groups().Insert(ctx, ports.Group{ID: g, Active: true})
		})
		state := bytes.Repeat([]byte{0x5a}, 16<<10)
		b.SetBytes(int64(len(state)))
		ref := newRawRef(b, h, s)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			must(b, s, func(ctx context.Context, tx ports.Tx) error {
				if err := tx.Blobs().Put(ctx, "mls", "group-state", state); err != nil {
					return err
				}
				if _, _, err := tx.LocalCommitLog().Append(ctx, localEntry(g, 1, uint64(i+1))); err != nil {
					return err
				}
				return tx.Groups().Update(ctx, g, func(gr *ports.Group) error { gr.Cursor = uint64(i + 1); return nil })
			})
			ref.sample()
		}
		ref.report()
	})
	b.Run("IdentityCache500Inboxes", func(b *testing.B) { benchIdentityCache(b, newHarness(b)) })
}

// rawRef measures the reference interleaved with the benchmark's own
// operations, one raw insert after each, outside the timer, so that both
// figures see the same machine load.
type rawRef struct {
	b     *testing.B
	raw   RawInserter
	s     ports.Store
	ctx   context.Context
	total time.Duration
	n     int
}

func newRawRef(b *testing.B, h Harness, s ports.Store) *rawRef {
	raw, _ := h.(RawInserter)
	return &rawRef{b: b, raw: raw, s: s, ctx: ctxFor(b)}
}

// sample times one raw insert with the benchmark timer stopped.
func (r *rawRef) sample() {
	if r.raw == nil {
		return
	}
	r.b.StopTimer()
	start := time.Now()
	if err := r.raw.RawInsert(r.ctx, r.s); err != nil {
		r.b.Fatal(err)
	}
	r.total += time.Since(start)
	r.n++
	r.b.StartTimer()
}

// report prints the reference beside the benchmark's figure.
func (r *rawRef) report() {
	perOp := float64(r.b.Elapsed().Nanoseconds()) / float64(r.b.N)
	if r.n == 0 {
		return
	}
	rawNs := float64(r.total.Nanoseconds()) / float64(r.n)
	r.b.ReportMetric(rawNs, "raw-insert-ns")
	r.b.ReportMetric(perOp/rawNs, "x-raw-insert")
}
