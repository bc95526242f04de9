package grpctransport

import (
	"context"
	"fmt"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/deliverypb"
)

var _ ports.HighestReader = (*Client)(nil)

// HighestSequenceIDs implements [ports.HighestReader] with one
// HighestSequenceIds call; like every read it is tried on the next
// replica when one fails unavailable.
func (c *Client) HighestSequenceIDs(ctx context.Context, topics [][]byte) ([]uint64, error) {
	var resp *deliverypb.HighestSequenceIdsResponse
	err := c.call(ctx, "highest sequence ids", true, func(ep *endpoint) (err error) {
		resp, err = ep.api.HighestSequenceIds(ctx, &deliverypb.HighestSequenceIdsRequest{Topics: topics})
		return err
	})
	if err != nil {
		return nil, err
	}
	ids := resp.GetSequenceIds()
	if len(ids) != len(topics) {
		return nil, fmt.Errorf("highest sequence ids: %w: the service answered %d ids for %d topics", ports.ErrUnavailable, len(ids), len(topics))
	}
	return ids, nil
}

// highestTopicsPerToken is how many topics of a batched highest-id read
// one rate token pays for (COMP-279).
const highestTopicsPerToken = 16

// HighestSequenceIds implements deliverypb.DeliveryServer. Beyond the
// call it costs a token per started 16 topics, taken before the read. A
// service without a batched read is asked topic by topic.
func (s *Server) HighestSequenceIds(ctx context.Context, req *deliverypb.HighestSequenceIdsRequest) (*deliverypb.HighestSequenceIdsResponse, error) {
	c, err := connOf(ctx)
	if err != nil {
		return nil, err
	}
	topics := req.GetTopics()
	if err := s.charge(c, (len(topics)+highestTopicsPerToken-1)/highestTopicsPerToken); err != nil {
		s.tarpit(ctx, err)
		return nil, s.status(ctx, err)
	}
	caller := c.getCaller()
	var ids []uint64
	if b, ok := s.svc.(ports.DeliveryHighestReader); ok {
		ids, err = b.HighestSequenceIDs(ctx, caller, topics)
	} else {
		ids, err = s.highestEach(ctx, caller, topics)
	}
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return &deliverypb.HighestSequenceIdsResponse{SequenceIds: ids}, nil
}

func (s *Server) highestEach(ctx context.Context, caller ports.Caller, topics [][]byte) ([]uint64, error) {
	if len(topics) == 0 || len(topics) > ports.MaxHighestTopics {
		return nil, fmt.Errorf("highest sequence ids: %w: %d topics, want 1 to %d", ports.ErrInvalidArgument, len(topics), ports.MaxHighestTopics)
	}
	ids := make([]uint64, len(topics))
	for i, t := range topics {
		n, err := s.svc.HighestSequenceID(ctx, caller, t)
		if err != nil {
			return nil, fmt.Errorf("highest sequence ids: topic %d: %w", i, err)
		}
		ids[i] = n
	}
	return ids, nil
}
