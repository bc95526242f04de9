package deliverydb

import (
	"context"
	"time"
)

// Hooks receive a [Store]'s measurements as they happen; regroupd turns
// them into Prometheus metrics. A nil field is skipped. They run on the
// store's own goroutines and must return quickly.
type Hooks struct {
	// IDWait receives, for every Append that took new sequence ids, how
	// long it waited for them: in the writer's queue and, on PostgreSQL,
	// for the row locks of its topics.
	IDWait func(time.Duration)
	// DBError receives the operation of every database call that failed
	// for a reason other than its caller's ctx: "append", "range",
	// "newest", "highest", "delete_expired" or "watch".
	DBError func(op string)
	// Retry receives the operation each time the store tries one again:
	// "append" when a group of PostgreSQL appends failed in the database
	// and each is tried alone, "watch" when the watch reconnects.
	Retry func(op string)
}

func (h Hooks) idWait(d time.Duration) {
	if h.IDWait != nil {
		h.IDWait(d)
	}
}

func (h Hooks) dbError(op string) {
	if h.DBError != nil {
		h.DBError(op)
	}
}

func (h Hooks) retry(op string) {
	if h.Retry != nil {
		h.Retry(op)
	}
}

// fail counts a failed database call (unless its ctx ended) and
// classifies the error (see dbErr).
func (s *Store) fail(ctx context.Context, op, counted string, err error) error {
	if ctx.Err() == nil {
		s.hooks.dbError(counted)
	}
	return dbErr(ctx, op, err)
}
