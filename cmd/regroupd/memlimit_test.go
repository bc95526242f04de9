package main

import (
	"context"
	"sync"
	"testing"
	"time"
)

// COMP-337: the runtime's soft memory limit follows the budgets and the
// open connections, 1/16 below the ceiling they make.
func TestCOMP337_MemoryLimitFollowsBudgetsAndConnections(t *testing.T) {
	var mu sync.Mutex
	conns := 0
	var set []int64
	m := &memoryLimit{base: 8 << 20, budget: 64 << 20, cache: 16 << 20,
		conns: func() int { mu.Lock(); defer mu.Unlock(); return conns },
		set:   func(l int64) int64 { mu.Lock(); defer mu.Unlock(); set = append(set, l); return 0 }}
	ceiling := func(n int64) int64 { c := int64(88<<20) + n*connAllowanceBytes; return c - c/16 }
	if got := m.limit(0); got != ceiling(0) {
		t.Fatalf("limit with no connection = %d, want %d", got, ceiling(0))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.run(ctx, time.Millisecond); close(done) }()
	waitFor := func(want int64) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			mu.Lock()
			ok := len(set) > 0 && set[len(set)-1] == want
			mu.Unlock()
			if ok {
				return
			}
		}
		t.Fatalf("limit never set to %d; set %v", want, set)
	}
	waitFor(ceiling(0))
	mu.Lock()
	conns = 40
	mu.Unlock()
	waitFor(ceiling(40))
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(set); i++ {
		if set[i] == set[i-1] {
			t.Fatalf("the same limit set twice in a row: %v", set)
		}
	}
}

// COMP-337: an operator's GOMEMLIMIT wins, and -memory-limit=false
// starts no governor.
func TestCOMP337_OperatorLimitWins(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "1GiB")
	s := &server{}
	s.governMemory(context.Background(), config{MemoryLimit: true}, quietLog())
	s.governMemory(context.Background(), config{MemoryLimit: false}, quietLog())
	s.wg.Wait() // no goroutine was started: s.rpc is nil and would panic
}
