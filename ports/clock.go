package ports

import "time"

// Clock is the only source of time core uses. Core never calls time.Now,
// so tests cross the 10-second, 1-day, 3-day and 72-hour deadlines of the
// specs by advancing a fake clock.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives the clock's time once d has
	// passed on this clock. A fake clock fires it when advanced past d.
	After(d time.Duration) <-chan time.Time
}
