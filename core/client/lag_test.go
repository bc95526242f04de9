package client

import (
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/clock"
)

// WorkerLag reports, on the client's clock, how long the oldest
// conversation due for a commit-log pass has waited and how many wait,
// and how far behind the publish of its newest envelope the topic worker
// finished — each checked against the times the test set.
func TestWorkerLag(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	clk := clock.NewFake(start)
	c := &Client{deps: Deps{Clock: clk}}
	if lag := c.WorkerLag(); lag != (WorkerLag{}) {
		t.Fatalf("lag before anything = %+v, want zero", lag)
	}
	c.workers = &workers{due: make(chan struct{}, 1)}
	c.logDue([]byte("a"))
	clk.Advance(3 * time.Second)
	c.logDue([]byte("b")) // the oldest still waits since the first
	clk.Advance(2 * time.Second)
	if lag := c.WorkerLag(); lag.CommitLogDue != 2 || lag.CommitLog != 5*time.Second {
		t.Fatalf("commit-log lag = %d due for %s, want 2 due for 5s", lag.CommitLogDue, lag.CommitLog)
	}
	c.dueLogs.takeNow() // the pass took them
	if lag := c.WorkerLag(); lag.CommitLogDue != 0 || lag.CommitLog != 0 {
		t.Fatalf("commit-log lag after the pass = %+v, want none", lag)
	}
	c.logDue([]byte("c"))
	clk.Advance(time.Second)
	if lag := c.WorkerLag(); lag.CommitLog != time.Second {
		t.Fatalf("commit-log lag of a new due conversation = %s, want 1s (since it became due)", lag.CommitLog)
	}

	published := clk.Now().Add(-700 * time.Millisecond)
	c.lag.received(published.UnixNano())
	c.lag.received(published.Add(-time.Hour).UnixNano()) // an older one does not lower the newest
	c.lag.processed(clk.Now())
	if lag := c.WorkerLag(); lag.Topic != 700*time.Millisecond {
		t.Fatalf("topic lag = %s, want 700ms", lag.Topic)
	}
}
