package gormstore

import (
	"context"
	"fmt"

	"github.com/regroup-mls/regroup/ports"
)

type heldWelcomes struct{ t *tx }

func welcomeToRow(w ports.HeldWelcome) heldWelcomeRow {
	return heldWelcomeRow{
		SequenceID: w.SequenceID, Envelope: nonEmpty(w.Envelope),
		ServerTimestampNs: toNs(w.ServerTimestamp), FirstSeenNs: toNs(w.FirstSeenAt),
		DeadlineNs: toNs(w.Deadline), Reason: w.Reason, Attempts: int64(w.Attempts),
		GroupID: nonEmpty(w.GroupID),
	}
}

func welcomeFromRow(r heldWelcomeRow) ports.HeldWelcome {
	return ports.HeldWelcome{
		SequenceID: r.SequenceID, Envelope: nonEmpty(r.Envelope),
		ServerTimestamp: fromNs(r.ServerTimestampNs), FirstSeenAt: fromNs(r.FirstSeenNs),
		Deadline: fromNs(r.DeadlineNs), Reason: r.Reason, Attempts: int(r.Attempts),
		GroupID: nonEmpty(r.GroupID),
	}
}

func (h heldWelcomes) Put(ctx context.Context, w ports.HeldWelcome) (bool, error) {
	const op = "hold welcome"
	if err := checkU64(op, w.SequenceID); err != nil {
		return false, err
	}
	row := welcomeToRow(w)
	res := h.t.q(ctx).Clauses(doNothing("sequence_id")).Create(&row)
	if res.Error != nil {
		return false, fail(ctx, op, res.Error)
	}
	return res.RowsAffected == 1, nil
}

func (h heldWelcomes) Get(ctx context.Context, seq uint64) (ports.HeldWelcome, error) {
	const op = "get held welcome"
	if err := checkU64(op, seq); err != nil {
		return ports.HeldWelcome{}, err
	}
	var row heldWelcomeRow
	if err := h.t.q(ctx).Where("sequence_id = ?", seq).Take(&row).Error; err != nil {
		return ports.HeldWelcome{}, fail(ctx, op, err)
	}
	return welcomeFromRow(row), nil
}

// Update refuses, with [ports.ErrDeadlineLater], an fn that clears a set
// deadline or moves it later (JOIN-063); an earlier deadline is allowed.
func (h heldWelcomes) Update(ctx context.Context, seq uint64, fn func(w *ports.HeldWelcome) error) error {
	const op = "update held welcome"
	if err := checkU64(op, seq); err != nil {
		return err
	}
	var row heldWelcomeRow
	if err := h.t.q(ctx).Clauses(forUpdate).Where("sequence_id = ?", seq).Take(&row).Error; err != nil {
		return fail(ctx, op, err)
	}
	w := welcomeFromRow(row)
	old := w.Deadline
	if err := fn(&w); err != nil {
		return err
	}
	if w.SequenceID != seq {
		return fmt.Errorf("%s: the sequence id cannot change: %w", op, ErrBadRecord)
	}
	if !old.IsZero() && (w.Deadline.IsZero() || w.Deadline.After(old)) {
		return fmt.Errorf("%s %d: deadline %v would become %v: %w", op, seq, old, w.Deadline, ports.ErrDeadlineLater)
	}
	row = welcomeToRow(w)
	if err := h.t.q(ctx).Model(&heldWelcomeRow{}).Where("sequence_id = ?", seq).Select("*").Omit("sequence_id").Updates(&row).Error; err != nil {
		return fail(ctx, op, err)
	}
	return nil
}

func (h heldWelcomes) List(ctx context.Context) ([]ports.HeldWelcome, error) {
	var rows []heldWelcomeRow
	if err := h.t.q(ctx).Order("sequence_id").Find(&rows).Error; err != nil {
		return nil, fail(ctx, "list held welcomes", err)
	}
	out := make([]ports.HeldWelcome, len(rows))
	for i, r := range rows {
		out[i] = welcomeFromRow(r)
	}
	return out, nil
}

func (h heldWelcomes) Delete(ctx context.Context, seq uint64) error {
	const op = "delete held welcome"
	if err := checkU64(op, seq); err != nil {
		return err
	}
	if err := h.t.q(ctx).Where("sequence_id = ?", seq).Delete(&heldWelcomeRow{}).Error; err != nil {
		return fail(ctx, op, err)
	}
	return nil
}

func (h heldWelcomes) Count(ctx context.Context) (int, error) {
	var n int64
	if err := h.t.q(ctx).Model(&heldWelcomeRow{}).Count(&n).Error; err != nil {
		return 0, fail(ctx, "count held welcomes", err)
	}
	return int(n), nil
}
