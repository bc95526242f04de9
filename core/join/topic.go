package join

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// read is one pass over the welcome topic (COMP-250, COMP-290, COMP-291).
// Every new envelope of a page is stored as a held Welcome in one
// transaction, so none is lost, and then attempted at once; the queue
// bound applies after the attempts, to what is still held (COMP-253).
//
// The durable cursor moves only over what the pass read contiguously from
// it, and only up to the highest Welcome whose join validation
// authenticated it (a GroupInfo signature by a verified member): sequence
// ids are not authenticated, and a cursor moved over junk at an extreme id
// would leave every later honest Welcome, whose id is lower, unread. Junk
// is read, decided, and skipped with the in-memory position r.skip, so a
// pass re-reads at most one page of what earlier passes of this process
// read (the probe from the durable cursor that finds new Welcomes below
// junk at the tail). Once a RescanInterval, a pass reads instead from the
// low-water mark to the end, which finds a Welcome placed below an
// authenticated one from an inbox the operator controls.
func (r *Receiver) read(ctx context.Context) error {
	var cur uint64
	var m marks
	if err := r.o.Store.Tx(ctx, func(tx ports.Tx) (err error) {
		if cur, err = cursor(ctx, tx); err != nil {
			return err
		}
		m, err = loadMarks(ctx, tx)
		return err
	}); err != nil {
		return err
	}
	if r.skip < cur {
		r.skip = cur
	}
	pos, contiguous, moveTo := cur, true, cur
	now := r.o.Clock.Now()
	rescan := !now.Before(m.rescan.Add(r.o.RescanInterval)) && m.floor < cur
	if rescan {
		// COMP-291: once an interval, read everything from the low-water
		// mark, so a Welcome placed below an authenticated one at a higher
		// id is found, and do not jump over what earlier passes read.
		pos = m.floor
	}
	var newest uint64 // the highest authenticated id read for the first time
	var errs []error
	for {
		envs, err := r.o.Transport.Query(ctx, r.Topic(), pos, welcomePage)
		if err != nil {
			errs = append(errs, fmt.Errorf("read welcomes: %w", err))
			break
		}
		if len(envs) == 0 {
			break
		}
		// Served out of order, a page is still read in sequence order, or
		// a Welcome served after a higher id would fall below the cursor.
		slices.SortStableFunc(envs, func(a, b *backendpb.OriginatorEnvelope) int {
			return cmp.Compare(a.GetSequenceId(), b.GetSequenceId())
		})
		fresh, last, err := r.store(ctx, pos, envs)
		if err != nil {
			errs = append(errs, fmt.Errorf("store welcomes: %w", err))
			break
		}
		for _, h := range fresh {
			if err := ctx.Err(); err != nil {
				return errors.Join(append(errs, err)...)
			}
			authed, err := r.attempt(ctx, h)
			if err != nil {
				errs = append(errs, fmt.Errorf("welcome %d: %w", h.SequenceID, err))
			}
			if authed && contiguous && h.SequenceID > moveTo {
				moveTo = h.SequenceID
			}
			if authed {
				newest = max(newest, h.SequenceID)
			}
		}
		evicted, err := r.enforceBound(ctx)
		r.report(evicted...)
		if err != nil {
			errs = append(errs, err)
			break
		}
		if last <= pos || last > math.MaxInt64 {
			break // a page that does not move forward, or ids past what a store holds
		}
		pos = last
		if len(fresh) == 0 && r.skip > pos && !rescan {
			// Nothing new in this page, and the rest up to skip was read
			// by an earlier pass: continue after it. Welcomes found there
			// no longer prove what lies below them was read.
			pos, contiguous = r.skip, false
		}
	}
	r.skip = max(r.skip, pos)
	next := m.advance(max(cur, moveTo), newest)
	if (rescan || (m.rescan.IsZero() && cur == 0)) && len(errs) == 0 {
		// A first pass of a new installation read everything: the next
		// re-read is one interval away.
		next.rescan = now
	}
	if moveTo > cur || next != m {
		if err := r.o.Store.Tx(ctx, func(tx ports.Tx) error {
			if err := saveMarks(ctx, tx, next); err != nil {
				return err
			}
			if c, err := cursor(ctx, tx); err != nil || c >= moveTo {
				return err
			}
			return setCursor(ctx, tx, moveTo)
		}); err != nil {
			errs = append(errs, fmt.Errorf("move welcome cursor: %w", err))
		}
	}
	return errors.Join(errs...)
}

// store holds, in one transaction, every envelope of a page after pos
// that is neither decided (JOIN-045) nor held already, and returns them
// with the page's last sequence id. Ids at or below pos, or above what a
// store can hold, are skipped with no effect.
func (r *Receiver) store(ctx context.Context, pos uint64, envs []*backendpb.OriginatorEnvelope) ([]ports.HeldWelcome, uint64, error) {
	var fresh []ports.HeldWelcome
	last := pos
	err := r.o.Store.Tx(ctx, func(tx ports.Tx) error {
		fresh, last = nil, pos
		for _, env := range envs {
			seq := env.GetSequenceId()
			if seq <= last {
				continue
			}
			last = seq
			if seq > math.MaxInt64 {
				continue
			}
			if done, err := tx.ProcessedEnvelopes().Has(ctx, r.Topic(), seq); err != nil || done {
				if err != nil {
					return err
				}
				continue
			}
			b, err := proto.Marshal(env)
			if err != nil {
				return err
			}
			h := ports.HeldWelcome{SequenceID: seq, Envelope: b,
				ServerTimestamp: time.Unix(0, env.GetServerTimestampNs()).UTC(), FirstSeenAt: r.o.Clock.Now(), Reason: "received"}
			inserted, err := tx.HeldWelcomes().Put(ctx, h)
			if err != nil {
				return err
			}
			if inserted {
				fresh = append(fresh, h)
			}
		}
		return nil
	})
	return fresh, last, err
}
