package deliverydb

import (
	"context"

	"github.com/regroup-mls/regroup/ports"
)

var _ ports.EnvelopeHighestReader = (*Store)(nil)

// HighestMany implements [ports.EnvelopeHighestReader]: one query over
// the topic table for every topic.
func (s *Store) HighestMany(ctx context.Context, topics [][]byte) ([]uint64, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	args := make([]any, len(topics))
	for i, t := range topics {
		args[i] = blob(t)
	}
	rows, err := s.db.WithContext(ctx).Table("delivery_topics").Select("topic, last_id").Where("topic IN ?", args).Rows()
	if err != nil {
		return nil, s.fail(ctx, "highest sequence ids", "highest_many", err)
	}
	defer rows.Close()
	last := make(map[string]int64, len(topics))
	for rows.Next() {
		var topic []byte
		var id int64
		if err := rows.Scan(&topic, &id); err != nil {
			return nil, s.fail(ctx, "highest sequence ids", "highest_many", err)
		}
		last[string(topic)] = id
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, "highest sequence ids", "highest_many", err)
	}
	out := make([]uint64, len(topics))
	for i, t := range topics {
		out[i] = uint64(max(last[string(t)], 0))
	}
	return out, nil
}
