package delivery

import (
	"context"
	"fmt"
	"sync"

	"github.com/regroup-mls/regroup/ports"
)

// memStore is a test double of ports.EnvelopeStore for the rule tests of
// this package; adapters/deliverydb is the real store, proven by the
// transport suite. Like it, it takes ids from one counter shared by every
// topic (COMP-041); one mutex makes commit order id order.
type memStore struct {
	mu     sync.Mutex
	next   uint64 // the last id given out, on any topic
	topics map[string][]ports.StoredEnvelope
	last   map[string]uint64
	expiry map[string]map[uint64]int64
	ranges int
}

func newMemStore() *memStore {
	return &memStore{topics: map[string][]ports.StoredEnvelope{}, last: map[string]uint64{}, expiry: map[string]map[uint64]int64{}}
}

func (m *memStore) Append(_ context.Context, envs []ports.NewStoredEnvelope) ([]uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]uint64, len(envs))
	for i, e := range envs {
		t := string(e.Topic)
		m.next++
		ids[i] = m.next
		m.last[t] = ids[i]
		m.topics[t] = append(m.topics[t], ports.StoredEnvelope{Topic: e.Topic, SequenceID: ids[i], ServerTimestampNS: e.ServerTimestampNS, Envelope: e.Envelope})
		if m.expiry[t] == nil {
			m.expiry[t] = map[uint64]int64{}
		}
		m.expiry[t][ids[i]] = e.ExpiresAtNS
	}
	return ids, nil
}

func (m *memStore) Range(_ context.Context, topic []byte, after uint64, limit, maxBytes int) ([]ports.StoredEnvelope, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ranges++
	var out []ports.StoredEnvelope
	size := 0
	for _, e := range m.topics[string(topic)] {
		if e.SequenceID > after && len(out) < limit {
			if size += len(e.Envelope); size > maxBytes && len(out) > 0 {
				break
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// rangeCalls returns how many times Range was called.
func (m *memStore) rangeCalls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ranges
}

func (m *memStore) Newest(_ context.Context, topic []byte) (ports.StoredEnvelope, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.topics[string(topic)]
	if len(l) == 0 {
		return ports.StoredEnvelope{}, fmt.Errorf("%w", ports.ErrNotFound)
	}
	return l[len(l)-1], nil
}

func (m *memStore) Highest(_ context.Context, topic []byte) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last[string(topic)], nil
}

func (m *memStore) DeleteExpired(_ context.Context, now int64) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for t, l := range m.topics {
		var keep []ports.StoredEnvelope
		for _, e := range l {
			if x := m.expiry[t][e.SequenceID]; x != 0 && x <= now {
				n++
				continue
			}
			keep = append(keep, e)
		}
		m.topics[t] = keep
	}
	return n, nil
}

func (m *memStore) Close() error { return nil }
