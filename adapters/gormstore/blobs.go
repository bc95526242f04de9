package gormstore

import (
	"context"
	"fmt"

	"github.com/regroup-mls/regroup/ports"
)

var _ ports.BlobPrefixReader = blobs{}

// The blob statements, prepared once per store (see stmtCache).
const (
	blobPutSQLite = `INSERT INTO "blobs" ("namespace", "blob_key", "value") VALUES (?, ?, ?)
ON CONFLICT ("namespace", "blob_key") DO UPDATE SET "value" = excluded."value"`
	blobPutPostgres = `INSERT INTO "blobs" ("namespace", "blob_key", "value") VALUES ($1, $2, $3)
ON CONFLICT ("namespace", "blob_key") DO UPDATE SET "value" = excluded."value"`
	// A value stored as text (never by this store) is cut as its bytes too.
	blobPrefixSQLite   = `SELECT substr(CAST("value" AS BLOB), 1, ?) FROM "blobs" WHERE "namespace" = ? AND "blob_key" = ?`
	blobPrefixPostgres = `SELECT substring("value" from 1 for $1) FROM "blobs" WHERE "namespace" = $2 AND "blob_key" = $3`
)

// maxPrefix is the longest prefix GetPrefix asks the database for (a
// PostgreSQL integer); no value is longer.
const maxPrefix = 1<<31 - 1

type processedEnvelopes struct{ t *tx }

func (p processedEnvelopes) Mark(ctx context.Context, topic []byte, seq uint64) (bool, error) {
	const op = "mark processed envelope"
	if err := checkKey(op, "topic", topic); err != nil {
		return false, err
	}
	if err := checkU64(op, seq); err != nil {
		return false, err
	}
	res := p.t.q(ctx).Clauses(doNothing("topic", "sequence_id")).
		Create(&processedEnvelopeRow{Topic: topic, SequenceID: seq})
	if res.Error != nil {
		return false, fail(ctx, op, res.Error)
	}
	return res.RowsAffected == 1, nil
}

func (p processedEnvelopes) Has(ctx context.Context, topic []byte, seq uint64) (bool, error) {
	const op = "processed envelope"
	if err := checkU64(op, seq); err != nil {
		return false, err
	}
	var n int64
	err := p.t.q(ctx).Model(&processedEnvelopeRow{}).Where("topic = ? AND sequence_id = ?", topic, seq).Count(&n).Error
	if err != nil {
		return false, fail(ctx, op, err)
	}
	return n > 0, nil
}

type identityCache struct{ t *tx }

func (c identityCache) Put(ctx context.Context, r ports.IdentityUpdateRecord) (bool, error) {
	const op = "put identity update"
	if r.InboxID == "" {
		return false, checkKey(op, "inbox id", nil)
	}
	if err := checkU64(op, r.SequenceID); err != nil {
		return false, err
	}
	row := identityUpdateRow{InboxID: r.InboxID, SequenceID: r.SequenceID, UpdateBytes: nonEmpty(r.Update)}
	res := c.t.q(ctx).Clauses(doNothing("inbox_id", "sequence_id")).Create(&row)
	if res.Error != nil {
		return false, fail(ctx, op, res.Error)
	}
	return res.RowsAffected == 1, nil
}

func (c identityCache) List(ctx context.Context, inboxID string, through uint64) ([]ports.IdentityUpdateRecord, error) {
	const op = "list identity updates"
	if through > 1<<63-1 {
		through = 1<<63 - 1 // every stored id is at most this
	}
	var rows []identityUpdateRow
	err := c.t.q(ctx).Where("inbox_id = ? AND sequence_id <= ?", inboxID, through).Order("sequence_id").Find(&rows).Error
	if err != nil {
		return nil, fail(ctx, op, err)
	}
	out := make([]ports.IdentityUpdateRecord, len(rows))
	for i, r := range rows {
		out[i] = ports.IdentityUpdateRecord{InboxID: r.InboxID, SequenceID: r.SequenceID, Update: nonEmpty(r.UpdateBytes)}
	}
	return out, nil
}

func (c identityCache) Highest(ctx context.Context, inboxID string) (uint64, error) {
	var n int64
	err := c.t.q(ctx).Model(&identityUpdateRow{}).Where("inbox_id = ?", inboxID).
		Select("COALESCE(MAX(sequence_id), 0)").Scan(&n).Error
	if err != nil {
		return 0, fail(ctx, "highest identity update", err)
	}
	return uint64(n), nil
}

type blobs struct{ t *tx }

func (b blobs) Get(ctx context.Context, namespace, key string) ([]byte, error) {
	var row blobRow
	err := b.t.q(ctx).Where("namespace = ? AND blob_key = ?", []byte(namespace), []byte(key)).Take(&row).Error
	if err != nil {
		return nil, fail(ctx, "get blob "+namespace+"/"+key, err)
	}
	if row.Value == nil {
		return []byte{}, nil
	}
	return row.Value, nil
}

// Put runs one prepared statement rather than gorm's Create: the engine
// writes its state as hundreds of blobs in a transaction, and gorm's
// building of each statement cost more memory than the values it stored.
func (b blobs) Put(ctx context.Context, namespace, key string, value []byte) error {
	op := "put blob " + namespace + "/" + key
	if namespace == "" || key == "" {
		return checkKey(op, "namespace or key", nil)
	}
	if value == nil {
		value = []byte{}
	}
	if err := b.t.exec(ctx, b.t.dialectQuery(blobPutSQLite, blobPutPostgres), []byte(namespace), []byte(key), value); err != nil {
		return fail(ctx, op, err)
	}
	return nil
}

// GetPrefix implements [ports.BlobPrefixReader]: the database cuts the
// value (substr on SQLite, substring on PostgreSQL, both counting bytes
// of a BLOB or bytea), so only the prefix crosses to the process.
func (b blobs) GetPrefix(ctx context.Context, namespace, key string, n int) ([]byte, error) {
	op := "get blob prefix " + namespace + "/" + key
	n = min(max(n, 0), maxPrefix)
	rows, err := b.t.query(ctx, b.t.dialectQuery(blobPrefixSQLite, blobPrefixPostgres), n, []byte(namespace), []byte(key))
	if err != nil {
		return nil, fail(ctx, op, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, fail(ctx, op, err)
		}
		return nil, fmt.Errorf("%s: %w", op, ports.ErrNotFound)
	}
	var v []byte
	if err := rows.Scan(&v); err != nil {
		return nil, fail(ctx, op, err)
	}
	if err := rows.Close(); err != nil {
		return nil, fail(ctx, op, err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

func (b blobs) Delete(ctx context.Context, namespace, key string) error {
	err := b.t.q(ctx).Where("namespace = ? AND blob_key = ?", []byte(namespace), []byte(key)).Delete(&blobRow{}).Error
	if err != nil {
		return fail(ctx, "delete blob "+namespace+"/"+key, err)
	}
	return nil
}

// Keys compares keys as bytes on every dialect: the prefix is a range
// [prefix, prefixEnd) rather than LIKE, whose case rules differ.
func (b blobs) Keys(ctx context.Context, namespace, prefix string) ([]string, error) {
	q := b.t.q(ctx).Model(&blobRow{}).Where("namespace = ?", []byte(namespace))
	if prefix != "" {
		q = q.Where("blob_key >= ?", []byte(prefix))
		if end := prefixEnd([]byte(prefix)); end != nil {
			q = q.Where("blob_key < ?", end)
		}
	}
	var keys [][]byte
	if err := q.Order("blob_key").Pluck("blob_key", &keys).Error; err != nil {
		return nil, fail(ctx, "list blob keys in "+namespace, err)
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = string(k)
	}
	return out, nil
}
