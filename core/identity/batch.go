package identity

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/regroup-mls/regroup/ports"
)

// inboxWork is one inbox of a batch: the requests that name it and what
// is known of its topic.
type inboxWork struct {
	inboxID string
	reqs    []int  // indexes of the requests naming the inbox
	through uint64 // the highest sequence id requested
	held    *held  // the held records through `through`, each verified once
	highest uint64 // the highest sequence id held
	fetched []ports.IdentityUpdateRecord
	// verified are the fetched records' updates, verified by the fetch.
	verified map[uint64]verified
	// fetchErr is the last fetch's failure, nil after a fetch succeeded.
	fetchErr error
}

// AssociationStates implements [ports.BatchIdentity]: it resolves every
// request as [Resolver.AssociationState] does, with one retry window
// measured from the call, in one pass for all inboxes: one store
// transaction reads what is held, the inboxes still missing an update are
// fetched Concurrency at a time (each through the highest sequence id
// requested of it), one transaction stores what every fetch returned, and
// each held update is decoded and verified once per call (COMP-130), the
// signatures of many updates in one batch (COMP-580). The answers are
// those of one AssociationState call per request.
func (r *Resolver) AssociationStates(ctx context.Context, reqs []ports.IdentityRequest) ([]ports.IdentityResult, error) {
	res := make([]ports.IdentityResult, len(reqs))
	done := make([]bool, len(reqs))
	pending := plan(reqs, res, done)
	deadline := r.opts.Clock.Now().Add(r.opts.RetryWindow)
	for attempt := 0; len(pending) > 0; attempt++ {
		if err := r.pass(ctx, pending, attempt == 0); err != nil {
			return nil, err
		}
		pending = r.answer(reqs, pending, res, done)
		if len(pending) == 0 || attempt == 0 {
			continue // the first fetch goes out at once, without waiting
		}
		now := r.opts.Clock.Now()
		if !now.Before(deadline) {
			for _, w := range pending {
				for _, i := range w.reqs {
					if !done[i] {
						res[i].Err = r.notFound(reqs[i], w.fetchErr)
					}
				}
			}
			return res, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-r.opts.Clock.After(min(r.opts.RetryInterval, deadline.Sub(now))):
		}
	}
	return res, nil
}

// plan answers the requests no update can answer (a malformed inbox id,
// sequence id 0 or one above the store's range) with ErrNotFound, and
// groups the others by inbox, in the order the inboxes first appear.
func plan(reqs []ports.IdentityRequest, res []ports.IdentityResult, done []bool) []*inboxWork {
	byInbox := map[string]*inboxWork{}
	var pending []*inboxWork
	for i, q := range reqs {
		if _, err := Topic(q.InboxID); err != nil {
			res[i].Err, done[i] = fmt.Errorf("association state: %w: %v", ports.ErrNotFound, err), true
			continue
		}
		if q.SequenceID == 0 || q.SequenceID > math.MaxInt64 {
			res[i].Err = fmt.Errorf("association state of %s at %d: %w: no update has that sequence id", q.InboxID, q.SequenceID, ports.ErrNotFound)
			done[i] = true
			continue
		}
		w := byInbox[q.InboxID]
		if w == nil {
			w = &inboxWork{inboxID: q.InboxID, held: newHeld(q.InboxID)}
			byInbox[q.InboxID] = w
			pending = append(pending, w)
		}
		w.reqs, w.through = append(w.reqs, i), max(w.through, q.SequenceID)
	}
	return pending
}

// pass brings what is known of the pending inboxes up to date: the first
// reads the store; every later one fetches the topics and stores what
// they returned. Only a cancelled ctx or a store failure fails it.
func (r *Resolver) pass(ctx context.Context, pending []*inboxWork, first bool) error {
	var err error
	if first {
		err = r.readHeld(ctx, pending)
	} else {
		r.fetchAll(ctx, pending)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		err = r.storeFetched(ctx, pending)
	}
	if err != nil {
		return fmt.Errorf("association states: %w", err)
	}
	return nil
}

// notFound is the answer for a request the retry window ended without:
// the last fetch's failure, or ErrNotFound when the fetches succeeded.
func (r *Resolver) notFound(q ports.IdentityRequest, fetchErr error) error {
	if fetchErr != nil {
		return fmt.Errorf("association state of %s at %d: %w", q.InboxID, q.SequenceID, fetchErr)
	}
	return fmt.Errorf("association state of %s at %d: %w: no update at that sequence id after fetching for %v",
		q.InboxID, q.SequenceID, ports.ErrNotFound, r.opts.RetryWindow)
}

// fetchAll fetches the pending inboxes' topics after what each holds,
// a page of Concurrency topics at a time, verifying each round's updates
// in one batch, into each inbox's fetched records.
func (r *Resolver) fetchAll(ctx context.Context, pending []*inboxWork) {
	reads := make([]*topicRead, len(pending))
	for i, w := range pending {
		reads[i] = &topicRead{inboxID: w.inboxID, after: w.highest, through: w.through}
	}
	r.fetchMany(ctx, reads)
	for i, w := range pending {
		w.fetched, w.verified, w.fetchErr = reads[i].recs, reads[i].known, reads[i].err
	}
}

// readHeld reads everything held for the pending inboxes, in one
// transaction: one ListMany when the cache has the ability (COMP-587),
// one List per inbox otherwise.
func (r *Resolver) readHeld(ctx context.Context, pending []*inboxWork) error {
	ids := make([]string, len(pending))
	for i, w := range pending {
		ids[i] = w.inboxID
	}
	var reads [][]ports.IdentityUpdateRecord
	err := r.opts.Store.Tx(ctx, func(tx ports.Tx) error {
		var err error
		reads, err = listHeld(ctx, tx.IdentityCache(), ids)
		return err
	})
	if err != nil {
		return err
	}
	r.hold(pending, reads)
	return nil
}

// storeFetched stores every inbox's fetched records in one transaction.
// A record the store already held another one at the sequence id of (the
// store keeps the first) makes the transaction read that inbox again;
// otherwise what is held is what was held plus what was stored.
func (r *Resolver) storeFetched(ctx context.Context, pending []*inboxWork) error {
	var reads [][]ports.IdentityUpdateRecord
	err := r.opts.Store.Tx(ctx, func(tx ports.Tx) error {
		var err error
		reads, err = storeAll(ctx, tx.IdentityCache(), pending)
		return err
	})
	if err != nil {
		return err
	}
	r.hold(pending, reads)
	return nil
}

// hold decodes and verifies each inbox's newly read records up to the
// highest sequence id requested of it, all inboxes' signatures in one
// batch (COMP-580) except those of updates the fetch verified, and notes
// the highest sequence id read.
func (r *Resolver) hold(pending []*inboxWork, reads [][]ports.IdentityUpdateRecord) {
	hs := make([]*held, len(pending))
	through := make([]uint64, len(pending))
	known := make([]map[uint64]verified, len(pending))
	for i, w := range pending {
		hs[i], through[i], known[i] = w.held, w.through, w.verified
		for _, rec := range reads[i] {
			w.highest = max(w.highest, rec.SequenceID)
		}
	}
	addAll(hs, reads, through, known)
	for _, w := range pending {
		w.fetched, w.verified = nil, nil
	}
}

// answer resolves every open request whose inbox's held updates decide it
// and returns the inboxes that still have open requests: a request is
// answered with the fold at its sequence id when a valid update is held
// there (JOIN-051), and with ErrNotFound when a later update is held and
// none valid there (JOIN-059).
func (r *Resolver) answer(reqs []ports.IdentityRequest, pending []*inboxWork, res []ports.IdentityResult, done []bool) []*inboxWork {
	var still []*inboxWork
	for _, w := range pending {
		open := false
		for _, i := range w.reqs {
			if done[i] {
				continue
			}
			seq := reqs[i].SequenceID
			switch {
			case w.held.validAt(seq):
				res[i].State, done[i] = w.held.fold(seq), true
			case w.highest >= seq:
				res[i].Err = fmt.Errorf("association state of %s at %d: %w: the topic holds no valid update at that sequence id",
					w.inboxID, seq, ports.ErrNotFound)
				done[i] = true
			default:
				open = true
			}
		}
		if open {
			still = append(still, w)
		}
	}
	return still
}

// each runs fn(0) … fn(n-1), Concurrency at a time, and returns when all
// have returned.
func (r *Resolver) each(n int, fn func(i int)) {
	workers := min(n, r.opts.Concurrency)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}
