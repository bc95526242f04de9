package delivery

import (
	"context"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// readBudget bounds the bytes of stored envelopes that reads hold in
// memory across the service (COMP-140). Waiters are served in order.
type readBudget struct {
	size int64
	sem  *semaphore.Weighted
	used atomic.Int64
}

func newReadBudget(size int64) *readBudget {
	return &readBudget{size: size, sem: semaphore.NewWeighted(size)}
}

// acquire takes n bytes (at most the whole budget), waiting within ctx.
func (b *readBudget) acquire(ctx context.Context, n int64) error {
	if n <= 0 {
		return nil
	}
	n = min(n, b.size)
	if err := b.sem.Acquire(ctx, n); err != nil {
		return err
	}
	b.used.Add(n)
	return nil
}

// release gives back n bytes taken by acquire.
func (b *readBudget) release(n int64) {
	if n <= 0 {
		return
	}
	n = min(n, b.size)
	b.used.Add(-n)
	b.sem.Release(n)
}

// ReadBudgetInUse returns the bytes of stored envelopes that reads hold
// now (see [Options.ReadBudgetBytes]); operators export it as a gauge.
func (s *Service) ReadBudgetInUse() int64 { return s.budget.used.Load() }
