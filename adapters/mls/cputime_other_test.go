//go:build !linux

package mls_test

import "time"

var benchStart = time.Now()

// threadCPU falls back to wall time where per-thread CPU time is not
// available.
func threadCPU() time.Duration { return time.Since(benchStart) }
