package gormstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/regroup-mls/regroup/ports"
)

type readds struct{ t *tx }

func readdFromRow(r readdRow) ports.ReaddStatus {
	return ports.ReaddStatus{
		GroupID: r.GroupID, InstallationKey: r.InstallationKey,
		Requested: r.Requested, RequestedAt: r.RequestedAt, RespondedAt: r.RespondedAt,
		NotBefore: fromNs(r.NotBeforeNs), UpdatedAt: fromNs(r.UpdatedNs),
	}
}

func (r readds) Get(ctx context.Context, groupID, installationKey []byte) (ports.ReaddStatus, error) {
	var row readdRow
	err := r.t.q(ctx).Where("group_id = ? AND installation_key = ?", groupID, installationKey).Take(&row).Error
	if err != nil {
		return ports.ReaddStatus{}, fail(ctx, "get readd status", err)
	}
	return readdFromRow(row), nil
}

func (r readds) Upsert(ctx context.Context, groupID, installationKey []byte, fn func(s *ports.ReaddStatus) error) error {
	const op = "upsert readd status"
	if err := checkKey(op, "group id", groupID); err != nil {
		return err
	}
	if err := checkKey(op, "installation key", installationKey); err != nil {
		return err
	}
	var row readdRow
	err := r.t.q(ctx).Clauses(forUpdate).
		Where("group_id = ? AND installation_key = ?", groupID, installationKey).Take(&row).Error
	s := ports.ReaddStatus{GroupID: groupID, InstallationKey: installationKey}
	switch {
	case err == nil:
		s = readdFromRow(row)
	case !errors.Is(err, gorm.ErrRecordNotFound):
		return fail(ctx, op, err)
	}
	if err := fn(&s); err != nil {
		return err
	}
	if !bytes.Equal(s.GroupID, groupID) || !bytes.Equal(s.InstallationKey, installationKey) {
		return fmt.Errorf("%s: the keys cannot change: %w", op, ErrBadRecord)
	}
	if err := checkU64(op, s.RequestedAt, s.RespondedAt); err != nil {
		return err
	}
	row = readdRow{
		GroupID: groupID, InstallationKey: installationKey,
		Requested: s.Requested, RequestedAt: s.RequestedAt, RespondedAt: s.RespondedAt,
		NotBeforeNs: toNs(s.NotBefore), UpdatedNs: toNs(s.UpdatedAt),
	}
	if err := r.t.q(ctx).Clauses(replace("group_id", "installation_key")).Create(&row).Error; err != nil {
		return fail(ctx, op, err)
	}
	return nil
}

func (r readds) ListRequested(ctx context.Context) ([]ports.ReaddStatus, error) {
	var rows []readdRow
	if err := r.t.q(ctx).Where("requested = ?", true).Order("group_id, installation_key").Find(&rows).Error; err != nil {
		return nil, fail(ctx, "list requested readds", err)
	}
	out := make([]ports.ReaddStatus, len(rows))
	for i, row := range rows {
		out[i] = readdFromRow(row)
	}
	return out, nil
}
