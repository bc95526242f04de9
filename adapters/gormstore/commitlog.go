package gormstore

import (
	"context"
	"errors"

	"gorm.io/gorm"

	"github.com/regroup-mls/regroup/ports"
)

type localLog struct{ t *tx }

func localToRow(e ports.LocalCommitLogEntry) localLogRow {
	return localLogRow{
		GroupID: e.GroupID, Seq: e.Seq, Membership: e.Membership,
		CommitSequenceID:          e.CommitSequenceID,
		LastEpochAuthenticator:    nonEmpty(e.LastEpochAuthenticator),
		CommitResult:              int32(e.CommitResult),
		AppliedEpochNumber:        e.AppliedEpochNumber,
		AppliedEpochAuthenticator: nonEmpty(e.AppliedEpochAuthenticator),
		RemovedThisInstallation:   e.RemovedThisInstallation, Legacy: e.Legacy,
		ChangeClass: int32(e.ChangeClass), AddedSuperAdmins: encodeStrings(e.AddedSuperAdmins),
		RoleEvidence: e.RoleEvidence, RecordedNs: toNs(e.RecordedAt),
	}
}

func localFromRow(op string, r localLogRow) (ports.LocalCommitLogEntry, error) {
	admins, err := decodeStrings(op, r.AddedSuperAdmins)
	if err != nil {
		return ports.LocalCommitLogEntry{}, err
	}
	return ports.LocalCommitLogEntry{
		GroupID: r.GroupID, Seq: r.Seq, Membership: r.Membership,
		CommitSequenceID:          r.CommitSequenceID,
		LastEpochAuthenticator:    nonEmpty(r.LastEpochAuthenticator),
		CommitResult:              ports.CommitResult(r.CommitResult),
		AppliedEpochNumber:        r.AppliedEpochNumber,
		AppliedEpochAuthenticator: nonEmpty(r.AppliedEpochAuthenticator),
		RemovedThisInstallation:   r.RemovedThisInstallation, Legacy: r.Legacy,
		ChangeClass: ports.ChangeClass(r.ChangeClass), AddedSuperAdmins: admins,
		RoleEvidence: r.RoleEvidence, RecordedAt: fromNs(r.RecordedNs),
	}, nil
}

func (l localLog) Append(ctx context.Context, e ports.LocalCommitLogEntry) (ports.LocalCommitLogEntry, bool, error) {
	const op = "append local commit-log entry"
	if err := checkKey(op, "group id", e.GroupID); err != nil {
		return e, false, err
	}
	if err := checkU64(op, e.Membership, e.CommitSequenceID, e.AppliedEpochNumber); err != nil {
		return e, false, err
	}
	db := l.t.q(ctx)
	var dup localLogRow
	err := db.Where("group_id = ? AND membership = ? AND commit_sequence_id = ?",
		e.GroupID, e.Membership, e.CommitSequenceID).Take(&dup).Error
	switch {
	case err == nil:
		stored, err := localFromRow(op, dup)
		return stored, false, err
	case !errors.Is(err, gorm.ErrRecordNotFound):
		return e, false, fail(ctx, op, err)
	}
	// Taking the next Seq locks the group's head row: appends to one group
	// run one at a time, and a concurrent duplicate that passed the check
	// above either waits and then fails to serialize (and is retried) or
	// meets the unique index on the commit outcome.
	// (The space in "( ?" keeps gorm from expanding the []byte as a list.)
	var seq int64
	if err := db.Raw(`INSERT INTO local_commit_log_heads (group_id, last_seq) VALUES ( ?, 1)
		ON CONFLICT (group_id) DO UPDATE SET last_seq = local_commit_log_heads.last_seq + 1
		RETURNING last_seq`, e.GroupID).Scan(&seq).Error; err != nil {
		return e, false, fail(ctx, op, err)
	}
	e.Seq = uint64(seq)
	row := localToRow(e)
	if err := db.Create(&row).Error; err != nil {
		return e, false, fail(ctx, op, err)
	}
	stored, err := localFromRow(op, row)
	return stored, true, err
}

func (l localLog) List(ctx context.Context, groupID []byte, afterSeq uint64, limit int) ([]ports.LocalCommitLogEntry, error) {
	const op = "list local commit-log entries"
	if err := checkU64(op, afterSeq); err != nil {
		return nil, err
	}
	q := l.t.q(ctx).Where("group_id = ? AND seq > ?", groupID, afterSeq).Order("seq")
	if limit > 0 {
		q = q.Limit(limit)
	}
	var rows []localLogRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, fail(ctx, op, err)
	}
	out := make([]ports.LocalCommitLogEntry, len(rows))
	for i, r := range rows {
		e, err := localFromRow(op, r)
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

func (l localLog) Last(ctx context.Context, groupID []byte) (ports.LocalCommitLogEntry, error) {
	const op = "last local commit-log entry"
	var row localLogRow
	if err := l.t.q(ctx).Where("group_id = ?", groupID).Order("seq DESC").Take(&row).Error; err != nil {
		return ports.LocalCommitLogEntry{}, fail(ctx, op, err)
	}
	return localFromRow(op, row)
}

func (l localLog) ByCommit(ctx context.Context, groupID []byte, membership, commitSequenceID uint64) (ports.LocalCommitLogEntry, error) {
	const op = "local commit-log entry by commit"
	if err := checkU64(op, membership, commitSequenceID); err != nil {
		return ports.LocalCommitLogEntry{}, err
	}
	var row localLogRow
	if err := l.t.q(ctx).Where("group_id = ? AND membership = ? AND commit_sequence_id = ?",
		groupID, membership, commitSequenceID).Take(&row).Error; err != nil {
		return ports.LocalCommitLogEntry{}, fail(ctx, op, err)
	}
	return localFromRow(op, row)
}

type remoteLog struct{ t *tx }

func remoteToRow(e ports.RemoteCommitLogEntry) remoteLogRow {
	return remoteLogRow{
		GroupID: e.GroupID, EnvelopeSequenceID: e.EnvelopeSequenceID,
		CommitSequenceID:          e.CommitSequenceID,
		LastEpochAuthenticator:    nonEmpty(e.LastEpochAuthenticator),
		CommitResult:              int32(e.CommitResult),
		AppliedEpochNumber:        e.AppliedEpochNumber,
		AppliedEpochAuthenticator: nonEmpty(e.AppliedEpochAuthenticator),
		AuthorInstallationKey:     nonEmpty(e.AuthorInstallationKey),
		AcceptedNs:                toNs(e.AcceptedAt),
	}
}

func remoteFromRow(r remoteLogRow) ports.RemoteCommitLogEntry {
	return ports.RemoteCommitLogEntry{
		GroupID: r.GroupID, EnvelopeSequenceID: r.EnvelopeSequenceID,
		CommitSequenceID:          r.CommitSequenceID,
		LastEpochAuthenticator:    nonEmpty(r.LastEpochAuthenticator),
		CommitResult:              ports.CommitResult(r.CommitResult),
		AppliedEpochNumber:        r.AppliedEpochNumber,
		AppliedEpochAuthenticator: nonEmpty(r.AppliedEpochAuthenticator),
		AuthorInstallationKey:     nonEmpty(r.AuthorInstallationKey),
		AcceptedAt:                fromNs(r.AcceptedNs),
	}
}

func (l remoteLog) Insert(ctx context.Context, e ports.RemoteCommitLogEntry) (bool, error) {
	const op = "insert remote commit-log entry"
	if err := checkKey(op, "group id", e.GroupID); err != nil {
		return false, err
	}
	if err := checkU64(op, e.EnvelopeSequenceID, e.CommitSequenceID, e.AppliedEpochNumber); err != nil {
		return false, err
	}
	row := remoteToRow(e)
	res := l.t.q(ctx).Clauses(doNothing("group_id", "envelope_sequence_id")).Create(&row)
	if res.Error != nil {
		return false, fail(ctx, op, res.Error)
	}
	return res.RowsAffected == 1, nil
}

func (l remoteLog) List(ctx context.Context, groupID []byte, after uint64, limit int) ([]ports.RemoteCommitLogEntry, error) {
	const op = "list remote commit-log entries"
	if err := checkU64(op, after); err != nil {
		return nil, err
	}
	q := l.t.q(ctx).Where("group_id = ? AND envelope_sequence_id > ?", groupID, after).Order("envelope_sequence_id")
	if limit > 0 {
		q = q.Limit(limit)
	}
	var rows []remoteLogRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, fail(ctx, op, err)
	}
	out := make([]ports.RemoteCommitLogEntry, len(rows))
	for i, r := range rows {
		out[i] = remoteFromRow(r)
	}
	return out, nil
}

func (l remoteLog) Last(ctx context.Context, groupID []byte) (ports.RemoteCommitLogEntry, error) {
	var row remoteLogRow
	if err := l.t.q(ctx).Where("group_id = ?", groupID).Order("envelope_sequence_id DESC").Take(&row).Error; err != nil {
		return ports.RemoteCommitLogEntry{}, fail(ctx, "last remote commit-log entry", err)
	}
	return remoteFromRow(row), nil
}

func (l remoteLog) ReadPosition(ctx context.Context, groupID []byte) (uint64, error) {
	var rows []readPositionRow
	if err := l.t.q(ctx).Where("group_id = ?", groupID).Limit(1).Find(&rows).Error; err != nil {
		return 0, fail(ctx, "read position", err)
	}
	if len(rows) == 0 {
		return 0, nil
	}
	return rows[0].SequenceID, nil
}

func (l remoteLog) SetReadPosition(ctx context.Context, groupID []byte, seq uint64) error {
	const op = "set read position"
	if err := checkKey(op, "group id", groupID); err != nil {
		return err
	}
	if err := checkU64(op, seq); err != nil {
		return err
	}
	return raise(ctx, l.t.q(ctx), op, &readPositionRow{GroupID: groupID, SequenceID: seq},
		[]string{"group_id"}, "sequence_id", seq, "group_id = ?", groupID)
}

func (l remoteLog) ByCommit(ctx context.Context, groupID []byte, commitSequenceID uint64) (ports.RemoteCommitLogEntry, error) {
	const op = "accepted commit-log entry by commit"
	if err := checkU64(op, commitSequenceID); err != nil {
		return ports.RemoteCommitLogEntry{}, err
	}
	var row remoteLogRow
	if err := l.t.q(ctx).Where("group_id = ? AND commit_sequence_id = ?", groupID, commitSequenceID).
		Order("envelope_sequence_id").Take(&row).Error; err != nil {
		return ports.RemoteCommitLogEntry{}, fail(ctx, op, err)
	}
	return remoteFromRow(row), nil
}

func (l remoteLog) Rewind(ctx context.Context, groupID []byte, bound uint64) (uint64, int, error) {
	const op = "rewind read position"
	if err := checkKey(op, "group id", groupID); err != nil {
		return 0, 0, err
	}
	if err := checkU64(op, bound); err != nil {
		return 0, 0, err
	}
	db := l.t.q(ctx)
	res := db.Where("group_id = ? AND envelope_sequence_id > ?", groupID, bound).Delete(&remoteLogRow{})
	if res.Error != nil {
		return 0, 0, fail(ctx, op, res.Error)
	}
	var rows []remoteLogRow
	if err := db.Where("group_id = ?", groupID).Order("envelope_sequence_id DESC").Limit(1).Find(&rows).Error; err != nil {
		return 0, 0, fail(ctx, op, err)
	}
	var pos uint64
	if len(rows) == 1 {
		pos = rows[0].EnvelopeSequenceID
	}
	row := readPositionRow{GroupID: groupID, SequenceID: pos}
	if err := db.Clauses(replace("group_id")).Create(&row).Error; err != nil {
		return 0, 0, fail(ctx, op, err)
	}
	return pos, int(res.RowsAffected), nil
}

func (l remoteLog) Comparison(ctx context.Context, groupID []byte) (ports.ForkComparison, bool, error) {
	var rows []forkComparisonRow
	if err := l.t.q(ctx).Where("group_id = ?", groupID).Limit(1).Find(&rows).Error; err != nil {
		return ports.ForkComparison{}, false, fail(ctx, "fork comparison", err)
	}
	if len(rows) == 0 {
		return ports.ForkComparison{}, false, nil
	}
	r := rows[0]
	return ports.ForkComparison{GroupID: r.GroupID, Membership: r.Membership, Shared: r.Shared, NewestLocal: r.NewestLocal}, true, nil
}

func (l remoteLog) PutComparison(ctx context.Context, c ports.ForkComparison) error {
	const op = "put fork comparison"
	if err := checkKey(op, "group id", c.GroupID); err != nil {
		return err
	}
	if err := checkU64(op, c.Membership, c.Shared, c.NewestLocal); err != nil {
		return err
	}
	row := forkComparisonRow{GroupID: c.GroupID, Membership: c.Membership, Shared: c.Shared, NewestLocal: c.NewestLocal}
	if err := l.t.q(ctx).Clauses(replace("group_id")).Create(&row).Error; err != nil {
		return fail(ctx, op, err)
	}
	return nil
}

// raise inserts row unless its key exists, then sets column to v where the
// stored value is lower: a maximum that two racing writers cannot lower.
func raise(ctx context.Context, db *gorm.DB, op string, row any, key []string, column string, v uint64, where string, args ...any) error {
	if err := db.Clauses(doNothing(key...)).Create(row).Error; err != nil {
		return fail(ctx, op, err)
	}
	args = append(args, v)
	if err := db.Model(row).Where(where+" AND "+column+" < ?", args...).Update(column, v).Error; err != nil {
		return fail(ctx, op, err)
	}
	return nil
}
