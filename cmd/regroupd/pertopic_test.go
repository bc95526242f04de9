package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/regroup-mls/regroup/ports"
)

// perTopicStore is a broken ports.EnvelopeStore for the mutation test: it
// numbers each topic from 1 with its own counter (ids strictly increase
// per topic, no gaps, never reused), so only the rule that ids come from
// one counter shared by every topic (COMP-041, API-289 across topics) is
// broken.
type perTopicStore struct {
	mu     sync.Mutex
	topics map[string][]ports.StoredEnvelope
	last   map[string]uint64
}

var _ ports.EnvelopeStore = (*perTopicStore)(nil)

func newPerTopicStore() *perTopicStore {
	return &perTopicStore{topics: map[string][]ports.StoredEnvelope{}, last: map[string]uint64{}}
}

func (m *perTopicStore) Append(_ context.Context, envs []ports.NewStoredEnvelope) ([]uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]uint64, len(envs))
	for i, e := range envs {
		t := string(e.Topic)
		m.last[t]++
		ids[i] = m.last[t]
		m.topics[t] = append(m.topics[t], ports.StoredEnvelope{Topic: e.Topic, SequenceID: ids[i], ServerTimestampNS: e.ServerTimestampNS, Envelope: e.Envelope})
	}
	return ids, nil
}

func (m *perTopicStore) Range(_ context.Context, topic []byte, after uint64, limit, _ int) ([]ports.StoredEnvelope, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []ports.StoredEnvelope
	for _, e := range m.topics[string(topic)] {
		if e.SequenceID > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

func (m *perTopicStore) Newest(_ context.Context, topic []byte) (ports.StoredEnvelope, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.topics[string(topic)]
	if len(l) == 0 {
		return ports.StoredEnvelope{}, fmt.Errorf("newest: %w", ports.ErrNotFound)
	}
	return l[len(l)-1], nil
}

func (m *perTopicStore) Highest(_ context.Context, topic []byte) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last[string(topic)], nil
}

func (m *perTopicStore) DeleteExpired(context.Context, int64) (int64, error) { return 0, nil }

func (m *perTopicStore) Close() error { return nil }
