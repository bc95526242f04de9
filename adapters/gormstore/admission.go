package gormstore

import (
	"context"
	"sort"

	"github.com/regroup-mls/regroup/ports"
)

type publishProgress struct{ t *tx }

func (p publishProgress) Get(ctx context.Context, groupID []byte) (ports.PublishState, error) {
	var r publishStateRow
	if err := p.t.q(ctx).Where("group_id = ?", groupID).Take(&r).Error; err != nil {
		return ports.PublishState{}, fail(ctx, "get publish progress", err)
	}
	return ports.PublishState{
		GroupID: r.GroupID, ConfirmedThrough: r.ConfirmedThrough, EligibleFrom: r.EligibleFrom,
		LegacyRecovered: r.LegacyRecovered, Publisher: r.Publisher,
	}, nil
}

func (p publishProgress) Put(ctx context.Context, s ports.PublishState) error {
	const op = "put publish progress"
	if err := checkKey(op, "group id", s.GroupID); err != nil {
		return err
	}
	if err := checkU64(op, s.ConfirmedThrough, s.EligibleFrom); err != nil {
		return err
	}
	row := publishStateRow{
		GroupID: s.GroupID, ConfirmedThrough: s.ConfirmedThrough, EligibleFrom: s.EligibleFrom,
		LegacyRecovered: s.LegacyRecovered, Publisher: s.Publisher,
	}
	if err := p.t.q(ctx).Clauses(replace("group_id")).Create(&row).Error; err != nil {
		return fail(ctx, op, err)
	}
	return nil
}

type readerAdmission struct{ t *tx }

func (a readerAdmission) Floor(ctx context.Context, groupID []byte) (uint64, bool, error) {
	var rows []readerFloorRow
	if err := a.t.q(ctx).Where("group_id = ?", groupID).Limit(1).Find(&rows).Error; err != nil {
		return 0, false, fail(ctx, "legacy reader epoch floor", err)
	}
	if len(rows) == 0 {
		return 0, false, nil
	}
	return rows[0].EpochFloor, true, nil
}

func (a readerAdmission) SetFloor(ctx context.Context, groupID []byte, floor uint64) error {
	const op = "set legacy reader epoch floor"
	if err := checkKey(op, "group id", groupID); err != nil {
		return err
	}
	if err := checkU64(op, floor); err != nil {
		return err
	}
	row := readerFloorRow{GroupID: groupID, EpochFloor: floor}
	if err := a.t.q(ctx).Clauses(replace("group_id")).Create(&row).Error; err != nil {
		return fail(ctx, op, err)
	}
	return nil
}

func (a readerAdmission) Boundaries(ctx context.Context, groupID []byte) (map[string]uint64, error) {
	var rows []boundaryRow
	if err := a.t.q(ctx).Where("group_id = ?", groupID).Find(&rows).Error; err != nil {
		return nil, fail(ctx, "publisher boundaries", err)
	}
	out := make(map[string]uint64, len(rows))
	for _, r := range rows {
		out[string(r.InstallationKey)] = r.SequenceID
	}
	return out, nil
}

func (a readerAdmission) RaiseBoundary(ctx context.Context, groupID, installationKey []byte, seq uint64) error {
	const op = "raise publisher boundary"
	if err := checkKey(op, "group id", groupID); err != nil {
		return err
	}
	if err := checkKey(op, "installation key", installationKey); err != nil {
		return err
	}
	if err := checkU64(op, seq); err != nil {
		return err
	}
	row := &boundaryRow{GroupID: groupID, InstallationKey: installationKey, SequenceID: seq}
	return raise(ctx, a.t.q(ctx), op, row, []string{"group_id", "installation_key"}, "sequence_id", seq,
		"group_id = ? AND installation_key = ?", groupID, installationKey)
}

func (a readerAdmission) ResetBoundaries(ctx context.Context, groupID []byte, initial map[string]uint64) error {
	const op = "reset publisher boundaries"
	if err := checkKey(op, "group id", groupID); err != nil {
		return err
	}
	keys := make([]string, 0, len(initial))
	for k, v := range initial {
		if err := checkKey(op, "installation key", []byte(k)); err != nil {
			return err
		}
		if err := checkU64(op, v); err != nil {
			return err
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	db := a.t.q(ctx)
	if err := db.Where("group_id = ?", groupID).Delete(&boundaryRow{}).Error; err != nil {
		return fail(ctx, op, err)
	}
	if len(keys) == 0 {
		return nil
	}
	rows := make([]boundaryRow, len(keys))
	for i, k := range keys {
		rows[i] = boundaryRow{GroupID: groupID, InstallationKey: []byte(k), SequenceID: initial[k]}
	}
	if err := db.Create(&rows).Error; err != nil {
		return fail(ctx, op, err)
	}
	return nil
}
