package gormstore

import (
	"context"
	"database/sql"

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
	row := localToRow(e)
	seq, inserted, err := l.t.appendLocal(ctx, &row)
	if err != nil {
		return e, false, fail(ctx, op, err)
	}
	if !inserted {
		var dup localLogRow
		err := db.Where("group_id = ? AND membership = ? AND commit_sequence_id = ?",
			e.GroupID, e.Membership, e.CommitSequenceID).Take(&dup).Error
		if err != nil {
			return e, false, fail(ctx, op, err)
		}
		stored, err := localFromRow(op, dup)
		return stored, false, err
	}
	row.Seq = seq
	stored, err := localFromRow(op, row)
	return stored, true, err
}

// The local log's append takes the group's next Seq from its head row and
// inserts the entry, unless an entry of the same commit outcome is
// stored, with as few statements as the dialect allows (each statement is
// a round trip, or a parse on SQLite): on PostgreSQL one, whose
// data-modifying CTE bumps the head only when no such entry exists; on
// SQLite two, the head bump guarded the same way, then the insert.
// Taking the next Seq locks the group's head row: appends to one group run
// one at a time, and a concurrent duplicate that passed the existence test
// either waits and then fails to serialize (and is retried) or meets the
// unique index on the commit outcome.
const (
	localAppendPostgres = `WITH head AS (
	INSERT INTO local_commit_log_heads (group_id, last_seq)
	SELECT $1::bytea, 1 WHERE NOT EXISTS (SELECT 1 FROM local_commit_log
		WHERE group_id = $1 AND membership = $2 AND commit_sequence_id = $3)
	ON CONFLICT (group_id) DO UPDATE SET last_seq = local_commit_log_heads.last_seq + 1
	RETURNING last_seq)
INSERT INTO local_commit_log (group_id, seq, membership, commit_sequence_id, last_epoch_authenticator,
	commit_result, applied_epoch_number, applied_epoch_authenticator, removed_this_installation, legacy,
	change_class, added_super_admins, role_evidence, recorded_ns)
SELECT $1, last_seq, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13 FROM head
RETURNING seq`
	localHeadSQLite = `INSERT INTO local_commit_log_heads (group_id, last_seq)
SELECT ?1, 1 WHERE NOT EXISTS (SELECT 1 FROM local_commit_log
	WHERE group_id = ?1 AND membership = ?2 AND commit_sequence_id = ?3)
ON CONFLICT (group_id) DO UPDATE SET last_seq = local_commit_log_heads.last_seq + 1
RETURNING last_seq`
	localInsertSQLite = `INSERT INTO local_commit_log (group_id, seq, membership, commit_sequence_id, last_epoch_authenticator,
	commit_result, applied_epoch_number, applied_epoch_authenticator, removed_this_installation, legacy,
	change_class, added_super_admins, role_evidence, recorded_ns)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

// preparedQueries are the statements a store of dialect prepares when it
// opens (see stmtCache).
func preparedQueries(dialect string) []string {
	if dialect == "postgres" {
		return []string{localAppendPostgres, blobPutPostgres, blobPrefixPostgres}
	}
	return []string{localHeadSQLite, localInsertSQLite, blobPutSQLite, blobPrefixSQLite}
}

// appendLocal stores row at the group's next Seq and returns it; inserted
// is false (and nothing is stored) when an entry of row's commit outcome
// exists already.
func (t *tx) appendLocal(ctx context.Context, row *localLogRow) (seq uint64, inserted bool, err error) {
	r := row
	if t.postgres() {
		rows, err := t.query(ctx, localAppendPostgres, r.GroupID, r.Membership, r.CommitSequenceID,
			r.LastEpochAuthenticator, r.CommitResult, r.AppliedEpochNumber, r.AppliedEpochAuthenticator,
			r.RemovedThisInstallation, r.Legacy, r.ChangeClass, r.AddedSuperAdmins, r.RoleEvidence, r.RecordedNs)
		if err != nil {
			return 0, false, err
		}
		return scanSeq(rows)
	}
	rows, err := t.query(ctx, localHeadSQLite, r.GroupID, r.Membership, r.CommitSequenceID)
	if err != nil {
		return 0, false, err
	}
	if seq, inserted, err = scanSeq(rows); err != nil || !inserted {
		return 0, false, err
	}
	err = t.exec(ctx, localInsertSQLite, r.GroupID, seq, r.Membership, r.CommitSequenceID,
		r.LastEpochAuthenticator, r.CommitResult, r.AppliedEpochNumber, r.AppliedEpochAuthenticator,
		r.RemovedThisInstallation, r.Legacy, r.ChangeClass, r.AddedSuperAdmins, r.RoleEvidence, r.RecordedNs)
	return seq, err == nil, err
}

// scanSeq reads the one Seq a statement returned, if any, and closes rows.
func scanSeq(rows *sql.Rows) (uint64, bool, error) {
	defer rows.Close()
	if !rows.Next() {
		return 0, false, rows.Err()
	}
	var seq int64
	if err := rows.Scan(&seq); err != nil {
		return 0, false, err
	}
	return uint64(seq), true, rows.Close()
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
