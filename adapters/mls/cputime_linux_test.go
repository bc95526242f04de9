//go:build linux

package mls_test

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time the calling OS thread has used; the
// benchmark locks its goroutine to one thread so that time spent by other
// processes on a loaded machine is not counted.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
