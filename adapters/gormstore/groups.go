package gormstore

import (
	"bytes"
	"context"
	"fmt"

	"github.com/regroup-mls/regroup/ports"
)

type groups struct{ t *tx }

func groupToRow(g ports.Group) groupRow {
	return groupRow{
		ID: g.ID, ConversationType: int32(g.ConversationType), DMID: g.DMID,
		Consent: int32(g.Consent), Active: g.Active, MessageCursor: g.Cursor,
		JoinAnchor: g.JoinAnchor, Membership: g.Membership, GroupRoot: nonEmpty(g.GroupRoot),
		ForkState: int32(g.ForkState), MaybeForked: g.MaybeForked,
		MaybeForkedReason: g.MaybeForkedReason, MinProtocolVersion: g.MinProtocolVersion,
		RestoredPlaceholder: g.RestoredPlaceholder,
		CreatedNs:           toNs(g.CreatedAt), UpdatedNs: toNs(g.UpdatedAt),
	}
}

func groupFromRow(r groupRow) ports.Group {
	return ports.Group{
		ID: r.ID, ConversationType: ports.ConversationType(r.ConversationType), DMID: r.DMID,
		Consent: ports.ConsentState(r.Consent), Active: r.Active, Cursor: r.MessageCursor,
		JoinAnchor: r.JoinAnchor, Membership: r.Membership, GroupRoot: nonEmpty(r.GroupRoot),
		ForkState: ports.ForkState(r.ForkState), MaybeForked: r.MaybeForked,
		MaybeForkedReason: r.MaybeForkedReason, MinProtocolVersion: r.MinProtocolVersion,
		RestoredPlaceholder: r.RestoredPlaceholder,
		CreatedAt:           fromNs(r.CreatedNs), UpdatedAt: fromNs(r.UpdatedNs),
	}
}

func checkGroup(op string, g ports.Group) error {
	if err := checkKey(op, "group id", g.ID); err != nil {
		return err
	}
	return checkU64(op, g.Cursor, g.JoinAnchor, g.Membership)
}

func (r groups) Get(ctx context.Context, id []byte) (ports.Group, error) {
	var row groupRow
	if err := r.t.q(ctx).Where("id = ?", id).Take(&row).Error; err != nil {
		return ports.Group{}, fail(ctx, "get group", err)
	}
	return groupFromRow(row), nil
}

func (r groups) Insert(ctx context.Context, g ports.Group) error {
	const op = "insert group"
	if err := checkGroup(op, g); err != nil {
		return err
	}
	row := groupToRow(g)
	res := r.t.q(ctx).Clauses(doNothing("id")).Create(&row)
	if res.Error != nil {
		return fail(ctx, op, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("%s %x: %w", op, g.ID, ports.ErrAlreadyExists)
	}
	return nil
}

func (r groups) Update(ctx context.Context, id []byte, fn func(g *ports.Group) error) error {
	const op = "update group"
	var row groupRow
	if err := r.t.q(ctx).Clauses(forUpdate).Where("id = ?", id).Take(&row).Error; err != nil {
		return fail(ctx, op, err)
	}
	g := groupFromRow(row)
	if err := fn(&g); err != nil {
		return err
	}
	if !bytes.Equal(g.ID, id) {
		return fmt.Errorf("%s: the id cannot change: %w", op, ErrBadRecord)
	}
	if err := checkGroup(op, g); err != nil {
		return err
	}
	row = groupToRow(g)
	row.ID = id
	if err := r.t.q(ctx).Model(&groupRow{}).Where("id = ?", id).Select("*").Omit("id").Updates(&row).Error; err != nil {
		return fail(ctx, op, err)
	}
	return nil
}

func (r groups) List(ctx context.Context, f ports.GroupFilter) ([]ports.Group, error) {
	q := r.t.q(ctx).Order("id")
	if f.Consent != nil {
		q = q.Where("consent = ?", int32(*f.Consent))
	}
	if f.ConversationType != nil {
		q = q.Where("conversation_type = ?", int32(*f.ConversationType))
	}
	if f.Active != nil {
		q = q.Where("active = ?", *f.Active)
	}
	var rows []groupRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, fail(ctx, "list groups", err)
	}
	out := make([]ports.Group, len(rows))
	for i, row := range rows {
		out[i] = groupFromRow(row)
	}
	return out, nil
}
