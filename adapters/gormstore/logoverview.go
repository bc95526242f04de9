package gormstore

import (
	"context"

	"github.com/regroup-mls/regroup/ports"
)

var _ ports.CommitLogOverviewTx = (*tx)(nil)

// CommitLogOverview implements [ports.CommitLogOverviewTx].
func (t *tx) CommitLogOverview() ports.CommitLogOverview { return logOverview{t} }

type logOverview struct{ t *tx }

func (o logOverview) ReadPositions(ctx context.Context) (map[string]uint64, error) {
	var rows []readPositionRow
	if err := o.t.q(ctx).Find(&rows).Error; err != nil {
		return nil, fail(ctx, "read positions", err)
	}
	out := make(map[string]uint64, len(rows))
	for _, r := range rows {
		out[string(r.GroupID)] = r.SequenceID
	}
	return out, nil
}

func (o logOverview) Unconfirmed(ctx context.Context) ([][]byte, error) {
	var ids [][]byte
	err := o.t.q(ctx).Table("local_commit_log AS l").
		Joins("LEFT JOIN publish_progress AS p ON p.group_id = l.group_id").
		Where("p.group_id IS NULL OR l.seq > p.confirmed_through").
		Distinct("l.group_id").Order("l.group_id").Pluck("l.group_id", &ids).Error
	if err != nil {
		return nil, fail(ctx, "unconfirmed commit logs", err)
	}
	return ids, nil
}
