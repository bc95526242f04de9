package delivery

import (
	"context"
	"fmt"

	"github.com/regroup-mls/regroup/ports"
)

var _ ports.DeliveryHighestReader = (*Service)(nil)

// HighestSequenceIDs returns the highest sequence id ever assigned on
// each topic, in order, 0 for one that has none (API-244), in one store
// read when the store implements [ports.EnvelopeHighestReader]. It takes
// 1 to [ports.MaxHighestTopics] topics, each one the caller may read
// (COMP-279).
func (s *Service) HighestSequenceIDs(ctx context.Context, caller ports.Caller, topics [][]byte) ([]uint64, error) {
	if len(topics) == 0 {
		return nil, fmt.Errorf("highest sequence ids: %w: no topics", ports.ErrInvalidArgument)
	}
	if len(topics) > ports.MaxHighestTopics {
		return nil, fmt.Errorf("highest sequence ids: %w: %d topics, limit %d", ports.ErrInvalidArgument, len(topics), ports.MaxHighestTopics)
	}
	for i, t := range topics {
		if _, err := checkRead(caller, t); err != nil {
			return nil, fmt.Errorf("highest sequence ids: topic %d: %w", i, err)
		}
	}
	if b, ok := s.store.(ports.EnvelopeHighestReader); ok {
		ids, err := b.HighestMany(ctx, topics)
		if err != nil {
			return nil, fmt.Errorf("highest sequence ids: %w", err)
		}
		if len(ids) != len(topics) {
			return nil, fmt.Errorf("highest sequence ids: %w: the store answered %d ids for %d topics", ports.ErrUnavailable, len(ids), len(topics))
		}
		return ids, nil
	}
	ids := make([]uint64, len(topics))
	for i, t := range topics {
		n, err := s.store.Highest(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("highest sequence ids: topic %d: %w", i, err)
		}
		ids[i] = n
	}
	return ids, nil
}
