package memtransport

import (
	"context"
	"fmt"

	"github.com/regroup-mls/regroup/ports"
)

var _ ports.HighestReader = (*Transport)(nil)

// HighestSequenceIDs implements [ports.HighestReader]: one call of the
// service's batched read when it has one ([ports.DeliveryHighestReader]),
// else one HighestSequenceID per topic under the same checks.
func (t *Transport) HighestSequenceIDs(ctx context.Context, topics [][]byte) ([]uint64, error) {
	if err := ctxErr(ctx, "highest sequence ids"); err != nil {
		return nil, err
	}
	if b, ok := t.svc.(ports.DeliveryHighestReader); ok {
		return b.HighestSequenceIDs(ctx, t.caller, topics)
	}
	if len(topics) == 0 || len(topics) > ports.MaxHighestTopics {
		return nil, fmt.Errorf("highest sequence ids: %w: %d topics, want 1 to %d", ports.ErrInvalidArgument, len(topics), ports.MaxHighestTopics)
	}
	ids := make([]uint64, len(topics))
	for i, topic := range topics {
		n, err := t.svc.HighestSequenceID(ctx, t.caller, topic)
		if err != nil {
			return nil, fmt.Errorf("highest sequence ids: topic %d: %w", i, err)
		}
		ids[i] = n
	}
	return ids, nil
}
