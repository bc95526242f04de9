package join

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// lookups runs identity lookups so that a slow one does not stall the
// receiver (COMP-255). A lookup runs in its own goroutine; an attempt
// waits for it at most IdentityTimeout, and in one pass at most once: a
// Welcome whose lookup is still running is held for a retry (JOIN-085)
// while the others are processed. The lookup goes on in the background,
// bounded by maxBackground, and a later attempt takes its answer, so a
// resolver's own retry window (JOIN-051, JOIN-059) still completes.
type lookups struct {
	mu      sync.Mutex
	running map[string]*lookup
}

type lookup struct {
	done   chan struct{}
	val    any
	err    error
	waited bool // an attempt of the current pass already waited for it
}

// maxBackground bounds a lookup that outlives the attempt that started it.
const maxBackground = 10 * time.Minute

// errSlow marks a lookup that did not answer in time.
type errSlow struct {
	key string
	d   time.Duration
}

func (e *errSlow) Error() string {
	return fmt.Sprintf("identity lookup %s did not answer within %v; retried later", e.key, e.d)
}

func (e *errSlow) Unwrap() error { return ports.ErrUnavailable }

// newPass lets each running lookup be waited for once more.
func (l *lookups) newPass() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range l.running {
		x.waited = false
	}
}

// do returns fn's answer for key, starting fn unless it runs already.
func (l *lookups) do(ctx context.Context, key string, timeout time.Duration, fn func(ctx context.Context) (any, error)) (any, error) {
	l.mu.Lock()
	if l.running == nil {
		l.running = map[string]*lookup{}
	}
	x := l.running[key]
	if x == nil {
		x = &lookup{done: make(chan struct{})}
		l.running[key] = x
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), maxBackground)
		go func() {
			defer cancel()
			v, err := fn(bctx)
			l.mu.Lock()
			x.val, x.err = v, err
			l.mu.Unlock()
			close(x.done)
		}()
	}
	waited := x.waited
	x.waited = true
	l.mu.Unlock()
	wait := timeout
	if waited {
		wait = 0
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-x.done:
	case <-t.C:
		select {
		case <-x.done:
		default:
			return nil, &errSlow{key: key, d: timeout}
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running[key] == x {
		delete(l.running, key) // an answer is taken once; the next asks again
	}
	return x.val, x.err
}
