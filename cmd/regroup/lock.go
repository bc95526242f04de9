package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	regroup "github.com/regroup-mls/regroup"
	"github.com/regroup-mls/regroup/internal/lockfile"
	"github.com/regroup-mls/regroup/ports"
)

// errBusy reports a home another command holds for longer than this one
// was willing to wait (exit code 5).
var errBusy = errors.New("home in use")

// lockPoll is how often a command waiting for its home retries the lock.
const lockPoll = 50 * time.Millisecond

// openStore opens the home's store, whose open takes the store's
// exclusive lock (regroup.ErrStoreInUse): a home is one client, and two
// commands advancing one MLS state at once would fork it. While another
// command holds it, this one waits, saying once whom for, until ctx ends
// (--timeout).
func openStore(ctx context.Context, home, path string, waiting func(pid int)) (ports.Store, func(), error) {
	said := false
	for {
		store, closeStore, err := regroup.OpenSQLiteStore(ctx, path)
		if !errors.Is(err, regroup.ErrStoreInUse) {
			return store, closeStore, err
		}
		var held *lockfile.HeldError
		pid := 0
		if errors.As(err, &held) {
			pid = held.PID
		}
		if !said {
			waiting(pid)
			said = true
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("%w: %s is in use by another regroup command (%s) and stayed so until --timeout: "+
				"one home is one client; let that command finish or stop it", errBusy, home, holder(pid))
		case <-time.After(lockPoll):
		}
	}
}

func holder(pid int) string {
	if pid == 0 {
		return "process unknown"
	}
	return fmt.Sprintf("process %d", pid)
}
