package client

import (
	"sync"
	"time"
)

// WorkerLag is how far the client's workers are behind, for metrics
// ([Client.WorkerLag]).
type WorkerLag struct {
	// Topic is the time from the publish of the newest envelope the topic
	// worker had received to the end of the processing that followed it:
	// how far behind the delivery service the client's view was then.
	// Zero before the first envelope.
	Topic time.Duration
	// CommitLogDue is the number of conversations whose commit-log pass is
	// due now (after a merged commit) and has not run yet.
	CommitLogDue int
	// CommitLog is how long the oldest of those has waited; zero when none
	// waits.
	CommitLog time.Duration
}

// lagMeter keeps what WorkerLag reports.
type lagMeter struct {
	mu       sync.Mutex
	newestNS int64 // server timestamp of the newest envelope received
	topic    time.Duration
}

// received notes an envelope the topic worker received.
func (m *lagMeter) received(serverTimestampNS int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.newestNS = max(m.newestNS, serverTimestampNS)
}

// processed notes that the topic worker finished processing at now.
func (m *lagMeter) processed(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.newestNS != 0 {
		m.topic = max(now.Sub(time.Unix(0, m.newestNS)), 0)
	}
}

// WorkerLag reports how far the client's workers are behind now.
func (c *Client) WorkerLag() WorkerLag {
	now := c.deps.Clock.Now()
	c.lag.mu.Lock()
	lag := WorkerLag{Topic: c.lag.topic}
	c.lag.mu.Unlock()
	if c.currentWorkers() != nil {
		n, since := c.dueLogs.waiting()
		lag.CommitLogDue = n
		if n > 0 && !since.IsZero() {
			lag.CommitLog = max(now.Sub(since), 0)
		}
	}
	return lag
}
