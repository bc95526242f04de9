package grpctransport

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// writeProgress counts the bytes a connection has written to the
// network and wakes the waits for a written total (COMP-559): a stream
// or read waiting for room on its connection (COMP-322) is woken by the
// write that makes the room, not by a poll.
//
// A write costs a read of the monotonic clock and two atomic operations
// while no wait is satisfied by it; only the write that reaches the
// least total waited for takes the lock, to wake the waits it satisfies.
type writeProgress struct {
	// lastWrite is when the last write ended ([monotonic]); a write
	// stores it before it adds its bytes to written, so whoever sees the
	// bytes sees a time at least as late.
	lastWrite atomic.Int64
	written   atomic.Int64
	// wakeAt is the least total a registered wait waits for, 0 when none
	// waits. While a wait is registered it is nonzero and at most its
	// total; it is stored under mu.
	wakeAt atomic.Int64

	mu    sync.Mutex
	waits []*writeWait
}

// writeWait is one wait for a written total, registered again after each
// wake-up until the total it needs is written.
type writeWait struct {
	at int64
	// woken receives a token when the wait is woken; it was taken off the
	// list then.
	woken chan struct{}
}

func newWriteWait() *writeWait { return &writeWait{woken: make(chan struct{}, 1)} }

// wrote counts n bytes written. Called on every write: it allocates
// nothing, and takes a lock only when it satisfies a registered wait.
func (p *writeProgress) wrote(n int) {
	p.lastWrite.Store(monotonic())
	w := p.written.Add(int64(n))
	if at := p.wakeAt.Load(); at != 0 && w >= at {
		p.wake()
	}
}

// progressSince returns the later of since and the time of the last
// write. Call it after seeing the written total grow.
func (p *writeProgress) progressSince(since int64) int64 {
	return max(since, p.lastWrite.Load())
}

// wake hands a token to every registered wait whose total is written
// and takes them off the list.
func (p *writeProgress) wake() {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.written.Load()
	p.waits = slices.DeleteFunc(p.waits, func(x *writeWait) bool {
		if x.at > w {
			return false
		}
		select {
		case x.woken <- struct{}{}:
		default:
		}
		return true
	})
	p.storeWakeAt()
}

// storeWakeAt stores the least total waited for. p.mu is held.
func (p *writeProgress) storeWakeAt() {
	var least int64
	for _, x := range p.waits {
		if least == 0 || x.at < least {
			least = x.at
		}
	}
	p.wakeAt.Store(least)
}

// register puts x on the list, waiting for total at (at least 1). The
// caller checks the written total after register and before it waits:
// a write that ends before that check is seen by it, and one after it
// sees x registered and wakes it when it reaches at.
func (p *writeProgress) register(x *writeWait, at int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select { // a token of an earlier wake-up the waiter did not take
	case <-x.woken:
	default:
	}
	x.at = max(at, 1)
	p.waits = append(p.waits, x)
	if least := p.wakeAt.Load(); least == 0 || x.at < least {
		p.wakeAt.Store(x.at)
	}
}

// unregister takes x off the list if it is still on it.
func (p *writeProgress) unregister(x *writeWait) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(p.waits, x); i >= 0 {
		p.waits = slices.Delete(p.waits, i, i+1)
		p.storeWakeAt()
	}
}

// epoch is the origin of [monotonic].
var epoch = time.Now()

// monotonic returns the time since the process started, from the
// monotonic clock only.
func monotonic() int64 { return int64(time.Since(epoch)) }
