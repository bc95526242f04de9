// Package clock provides the two [ports.Clock] implementations: the system
// clock for deployments and a fake clock that tests advance by hand to cross
// the specs' deadlines (10 seconds, 1 day, 3 days, 72 hours) instantly.
package clock

import (
	"sort"
	"sync"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

var (
	_ ports.Clock = System{}
	_ ports.Clock = (*Fake)(nil)
)

// System is the wall clock.
type System struct{}

// Now returns time.Now.
func (System) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (System) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Fake is a clock that moves only when Advance or Set is called. It is safe
// for concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

// NewFake returns a fake clock reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// After returns a channel that receives the fake time once the clock has
// been advanced by at least d from now. d <= 0 fires at once.
func (f *Fake) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- f.now
		return ch
	}
	f.waiters = append(f.waiters, waiter{at: f.now.Add(d), ch: ch})
	return ch
}

// Advance moves the clock forward by d and fires every timer that is due,
// in the order they are due. A negative d is ignored: the clock never runs
// backwards.
func (f *Fake) Advance(d time.Duration) {
	if d < 0 {
		return
	}
	f.mu.Lock()
	f.set(f.now.Add(d))
	f.mu.Unlock()
}

// Set moves the clock to t if t is later than the current time.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	if t.After(f.now) {
		f.set(t)
	}
	f.mu.Unlock()
}

// Waiters returns how many timers are pending; tests use it to wait until
// the code under test has armed its timer before advancing.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

func (f *Fake) set(t time.Time) {
	f.now = t
	sort.SliceStable(f.waiters, func(i, j int) bool { return f.waiters[i].at.Before(f.waiters[j].at) })
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if !w.at.After(t) {
			w.ch <- t
			continue
		}
		kept = append(kept, w)
	}
	f.waiters = kept
}
