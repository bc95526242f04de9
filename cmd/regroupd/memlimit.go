package main

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"time"
)

// connAllowanceBytes is the memory one open connection may use beyond
// the read budget: its HTTP/2 receive window (1 MiB), read and write
// buffers (64 KiB each) and goroutine stacks (COMP-337).
const connAllowanceBytes = 5 << 18 // 1.25 MiB

// memoryLimit is the soft memory limit regroupd gives the Go runtime
// (COMP-337): the Go memory in use once it started (base), plus the read
// budget, plus the decoded public-state cache, plus an allowance per open
// connection. The runtime collects garbage harder as the process nears
// the limit, so the resident size follows the budgets the operator
// configured instead of reaching twice the live heap.
type memoryLimit struct {
	base, budget, cache int64
	conns               func() int
	set                 func(int64) int64
}

// goMemory returns the Go runtime's memory in use, the figure its memory
// limit bounds.
func goMemory() int64 {
	s := []rtmetrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	rtmetrics.Read(s)
	return int64(s[0].Value.Uint64() - s[1].Value.Uint64())
}

// limit is the soft limit for n open connections: 1/16 below the
// ceiling the budgets make, because the runtime's limit is soft —
// allocation goes on while a collection runs, and freed pages return to
// the system only behind it.
func (m *memoryLimit) limit(n int) int64 {
	ceiling := m.base + m.budget + m.cache + int64(n)*connAllowanceBytes
	return ceiling - ceiling/16
}

// run keeps the runtime's limit at m.limit of the open connections,
// adjusting it every interval until ctx ends.
func (m *memoryLimit) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	last := int64(-1)
	for {
		if l := m.limit(m.conns()); l != last {
			m.set(l)
			last = l
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// governMemory starts the memory governor unless the operator set
// GOMEMLIMIT (theirs wins) or -memory-limit=false.
func (s *server) governMemory(ctx context.Context, cfg config, log *slog.Logger) {
	if !cfg.MemoryLimit {
		return
	}
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		log.Info("memory limit left to GOMEMLIMIT")
		return
	}
	cache := int64(0)
	if cfg.AcceptCommits && cfg.PublicCacheBytes > 0 {
		cache = int64(cfg.PublicCacheBytes)
	}
	m := &memoryLimit{base: goMemory(), budget: cfg.ReadBudgetBytes, cache: cache,
		conns: func() int { return int(s.rpc.Stats().Connections) }, set: debug.SetMemoryLimit}
	log.Info("memory limit follows the budgets", "base_bytes", m.base, "read_budget_bytes", m.budget, "public_cache_bytes", cache, "per_connection_bytes", connAllowanceBytes)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		m.run(ctx, time.Second)
	}()
}
