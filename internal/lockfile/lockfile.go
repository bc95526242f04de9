// Package lockfile holds an exclusive lock on a file for the life of one
// holder: the lock that makes one client store one running client.
//
// A [Lock] is an advisory lock of the operating system (flock on Unix),
// taken on a file beside what it guards; the file holds the holder's
// process id so that the one who waits can say whom for. The kernel
// releases the lock when the holder exits, however it exits, so a
// crashed holder leaves no stale lock behind. Two opens of the same file
// conflict even inside one process: two clients of one store in one
// program are refused like two programs.
//
// # Errors
//
// [Acquire] returns a *[HeldError] (matching [ErrHeld]) when another
// holder has the lock, and any other error when the file cannot be
// created or locked at all.
package lockfile

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ErrHeld reports a lock another holder has.
var ErrHeld = errors.New("locked by another holder")

// HeldError reports who holds the lock at Path: PID is the process id the
// holder wrote, 0 when the file names none (a holder that has not
// written it yet, or one of an older version).
type HeldError struct {
	Path string
	PID  int
}

func (e *HeldError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("%s: %v", e.Path, ErrHeld)
	}
	return fmt.Sprintf("%s: %v (process %d)", e.Path, ErrHeld, e.PID)
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// Lock is a held lock; Release gives it up.
type Lock struct {
	f    *os.File
	path string
}

// Acquire takes the lock of path at once or fails: it creates the file
// (mode 0600) when missing, locks it without waiting and writes this
// process's id into it.
func Acquire(path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock file: %w", err)
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if held {
		pid := readPID(path)
		f.Close()
		return nil, &HeldError{Path: path, PID: pid}
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f, path: path}, nil
}

// Release gives the lock up. The file stays, empty: removing it would
// let a waiter lock a file a newcomer no longer sees.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	_ = l.f.Truncate(0)
	err := unlock(l.f)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	return err
}

// readPID reads the process id a holder wrote into path; 0 when none.
func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
