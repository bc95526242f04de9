package identity

import (
	"context"
	"fmt"
	"math"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/core/internal/readpos"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/identitypb"
)

// topicRead is one inbox's identity-update topic to read after sequence
// id after, through sequence id through, and what the read found.
type topicRead struct {
	inboxID        string
	after, through uint64
	// recs are the records of the updates that move forward, verified.
	recs []ports.IdentityUpdateRecord
	// known are recs' updates, decoded and verified, by sequence id.
	known map[uint64]verified
	// err is the transport's failure; recs hold the pages read before it.
	err error
}

// fetch reads the inbox's topic after sequence id after, page by page,
// until a page is empty or holds an envelope that does not move forward,
// or the pass has read at or after sequence id through, and returns the
// records of the updates that move forward. Only updates that verify and
// name the inbox are records (COMP-249): junk — bytes that are no
// verified update of this inbox — is read past in memory and never held,
// so an envelope the delivery service placed at 2^63−1 neither moves
// what is held past the honest updates published after it nor makes
// every later lookup answer JOIN-059. On a transport failure it returns
// the records of the pages read before it and the failure.
func (r *Resolver) fetch(ctx context.Context, inboxID string, after, through uint64) ([]ports.IdentityUpdateRecord, error) {
	t := &topicRead{inboxID: inboxID, after: after, through: through}
	r.fetchMany(ctx, []*topicRead{t})
	return t.recs, t.err
}

// livePass is a topic read in progress.
type livePass struct {
	t     *topicRead
	topic []byte
	pass  *readpos.Pass
	page  []*backendpb.OriginatorEnvelope
	err   error
	// items are the envelopes of the page that move forward, in order.
	items []pageItem
}

// pageItem is an envelope of a page at sequence id seq; cand is the index
// of its update among those a round verifies, -1 when it carries no
// update of the inbox.
type pageItem struct {
	seq  uint64
	u    *identitypb.IdentityUpdate
	cand int
}

// fetchMany is fetch for many topics at once, in rounds: each round reads
// the next page of every topic still being read, Concurrency at a time,
// then verifies every update of those pages in one batch (COMP-580), then
// moves each topic's read position over its page exactly as fetch reads
// one topic alone.
func (r *Resolver) fetchMany(ctx context.Context, reads []*topicRead) {
	var live []*livePass
	for _, t := range reads {
		topic, err := Topic(t.inboxID)
		if err != nil {
			t.err = err
			continue
		}
		live = append(live, &livePass{t: t, topic: topic, pass: r.tails.Start(t.inboxID, t.after)})
	}
	for len(live) > 0 {
		r.each(len(live), func(i int) {
			l := live[i]
			l.page, l.err = r.opts.Transport.Query(ctx, l.topic, l.pass.Pos(), r.opts.PageSize)
		})
		var us []*identitypb.IdentityUpdate
		for _, l := range live {
			l.items = l.items[:0]
			if l.err != nil {
				continue
			}
			pos := l.pass.Pos()
			for _, env := range l.page {
				seq := env.GetSequenceId()
				if seq <= pos {
					break // a sequence id that does not move forward ends the page
				}
				if seq > math.MaxInt64 {
					continue
				}
				it := pageItem{seq: seq, cand: -1}
				if u := env.GetEnvelope().GetIdentityUpdate(); u != nil && u.GetInboxId() == l.t.inboxID {
					it.u, it.cand = u, len(us)
					us = append(us, u)
				}
				l.items = append(l.items, it)
				pos = seq
			}
		}
		errs := verifyUpdates(us)
		still := live[:0]
		for _, l := range live {
			if r.settlePage(l, errs) {
				still = append(still, l)
			} else {
				l.pass.End()
			}
		}
		live = still
	}
}

// settlePage records a page's verified updates and moves the read
// position over it, and reports whether the topic's read goes on.
func (r *Resolver) settlePage(l *livePass, errs []error) bool {
	t := l.t
	if l.err != nil {
		t.err = fmt.Errorf("fetch identity updates of %s: %w", t.inboxID, l.err)
		return false
	}
	start := l.pass.Pos()
	for _, it := range l.items {
		var b []byte
		ok := it.cand >= 0 && errs[it.cand] == nil
		if ok {
			var err error
			b, err = proto.Marshal(it.u)
			ok = err == nil && len(b) > 0
		}
		if ok {
			t.recs = append(t.recs, ports.IdentityUpdateRecord{InboxID: t.inboxID, SequenceID: it.seq, Update: b})
			if t.known == nil {
				t.known = map[uint64]verified{}
			}
			t.known[it.seq] = verified{bytes: b, update: it.u}
		}
		l.pass.Read(it.seq, ok)
	}
	return l.pass.Pos() < t.through && l.pass.EndPage(l.pass.Pos() > start)
}
