// Package deliverydb is the delivery service's envelope database: a gorm
// implementation of [ports.EnvelopeStore] on SQLite (pure Go, WAL) and on
// PostgreSQL.
//
// # Sequence ids
//
// Sequence ids come from one counter shared by every topic of the
// database (companion definitions, COMP-041): the service's first envelope
// gets 1, every later one a higher id, whatever its topic. A topic's ids
// therefore strictly increase with gaps (other topics took the ids in
// between), and the specs may compare ids of different topics: FORK-077
// discards a commit-log entry naming a commit (a group-topic id) at or
// after the entry's own id, JOIN-037 and JOIN-050 compare group and
// identity ids with a Welcome's (API-289).
//
// Each topic still has a row in delivery_topics. It is the topic's lock
// and records the highest id ever assigned on the topic (what
// [Store.Highest] returns, also after a retention sweep). Append runs, in
// the transaction that inserts the envelopes:
//
//  1. lock the row of every topic of the batch, in ascending topic order
//     (so two batches naming the same topics cannot deadlock);
//  2. take one id per envelope from the global counter and give them out
//     in input order;
//  3. record each topic's new highest id and insert the envelopes.
//
// On PostgreSQL the counter is the sequence delivery_sequence_ids (CACHE 1,
// so values increase in the order nextval is called, across sessions).
// Appends that queue while a writer is busy form a group, and the writer
// runs steps 1 to 3 and the inserts for the whole group in one statement,
// the function delivery_append (migration 4), which is its own
// transaction; a process's writers (Options.Writers) take turns, one
// group at a time unless a group stalls (COMP-540), while other processes
// sharing the database run theirs in parallel. Why the ordering holds:
//
//   - Same topic: a group calls nextval only while it holds the topic's
//     row lock, and keeps that lock until it commits or rolls back. A
//     second group on the topic gets the lock, and so calls nextval, only
//     after the first has ended, so its ids are higher and it becomes
//     visible later. Within one topic id order is commit order: a reader
//     that has seen id x of a topic will never later see a lower id of
//     it, so re-reading from its cursor misses nothing (FORK-030).
//   - Across topics (API-289): an envelope is visible only after the
//     transaction that took its id committed; a publish that starts after
//     that calls nextval later, and a CACHE 1 sequence returns a higher
//     value to a later call, in whichever session.
//   - An id is never reused: nextval never returns a value twice, even
//     when the batch that took it rolls back (that id stays a gap).
//
// On SQLite the counter is the single row of delivery_sequence, raised in
// the writer's transaction. SQLite has one writer at a time, so commit
// order is id order on every topic at once. One writer commits every
// append queued meanwhile in one transaction (group commit), each in its
// own savepoint, so one fsync serves many publishers; a failed append's
// savepoint rolls its ids back.
//
// Migration 2 creates the counter on an existing database above the
// highest id any topic ever assigned, so ids stay unique and keep
// increasing across the upgrade.
//
// # Dedup keys and pages
//
// Migration 3 adds an optional dedup key per envelope, unique per topic:
// Append looks each key up in its transaction, after it holds the
// topic (SQLite's single writer; on PostgreSQL the topic's row lock, so
// two appends of one key to one topic cannot both insert it, from any
// process), and hands back the stored id. A key repeated within a group
// takes the id of its first envelope. Range caps a page in bytes as it reads (see [Store.Range]).
//
// # Errors
//
// A missing envelope wraps [ports.ErrNotFound]; a database failure wraps
// [ports.ErrUnavailable]; calls after Close wrap [ports.ErrClosed].
package deliverydb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"gorm.io/gorm"

	"github.com/regroup-mls/regroup/ports"
)

// envelopeRow is one stored envelope.
type envelopeRow struct {
	Topic             []byte `gorm:"column:topic;primaryKey"`
	SequenceID        int64  `gorm:"column:sequence_id;primaryKey;autoIncrement:false"`
	ServerTimestampNS int64  `gorm:"column:server_timestamp_ns"`
	ExpiresAtNS       int64  `gorm:"column:expires_at_ns"`
	Envelope          []byte `gorm:"column:envelope"`
	DedupKey          []byte `gorm:"column:dedup_key"`
	// Pending is read only: Append stores 0 (the column's default), and
	// AppendWithState marks a pending commit's envelopes (migration 6).
	Pending int64 `gorm:"column:pending;->"`
}

func (envelopeRow) TableName() string { return "delivery_envelopes" }

// blob passes bytes to gorm as one value; a bare []byte argument of a
// raw clause would be expanded into a list.
type blob []byte

// Value implements driver.Valuer.
func (b blob) Value() (driver.Value, error) { return []byte(b), nil }

// Store is an [ports.EnvelopeStore] on a gorm database. It is safe for
// concurrent use.
type Store struct {
	db      *gorm.DB
	sqlDB   *sql.DB
	dialect string
	schema  string
	dsn     string
	notify  bool
	// writeMu serializes SQLite writers in this process; SQLite admits one
	// writer at a time anyway, and waiting here costs less than its busy
	// handler's sleeps.
	writeMu *sync.Mutex
	// group runs the writers, which commit appends in groups: SQLite's
	// single writer, or PostgreSQL's Options.Writers, whose groups commit in
	// parallel except where they share a topic row.
	group  *groupCommitter
	hooks  Hooks
	closed atomic.Bool
}

var _ ports.EnvelopeStore = (*Store)(nil)

func (s *Store) check(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("envelope store: %w", ports.ErrClosed)
	}
	return ctx.Err()
}

// dbErr classifies a database error: context errors pass through, any
// other failure is ports.ErrUnavailable (the outcome may differ later).
func dbErr(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w: %w", op, ports.ErrUnavailable, ctx.Err())
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w: %w", op, ports.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w: %v", op, ports.ErrUnavailable, err)
}

// Append implements [ports.EnvelopeStore.Append]. Appends that arrive
// while a writer is busy are committed together by its next transaction
// (group commit): on SQLite each inside its own savepoint, so that one
// failing append does not fail the others; on PostgreSQL as one call of
// delivery_append, and a group the database refused is tried again one
// append at a time. Once queued, an append's transaction is not bound to
// its ctx: Append waits for it and reports its outcome, so it never
// returns while a commit that may hold the envelopes is in flight.
func (s *Store) Append(ctx context.Context, envs []ports.NewStoredEnvelope) ([]uint64, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if len(envs) == 0 {
		return nil, nil
	}
	return s.group.append(ctx, envs)
}

// appendIn stores envs inside tx, SQLite's writer transaction, and
// returns their ids in input order: envelopes whose dedup key is already
// stored on their topic (or earlier in envs) take the stored id; the
// others take their ids from the global counter and are inserted.
func (s *Store) appendIn(tx *gorm.DB, envs []ports.NewStoredEnvelope) ([]uint64, error) {
	ids := make([]uint64, len(envs))
	fresh, pos, dupOf, err := s.dedup(tx, envs, ids)
	if err != nil {
		return nil, err
	}
	if len(fresh) > 0 {
		newIDs, err := s.insert(tx, fresh)
		if err != nil {
			return nil, err
		}
		for j, i := range pos {
			ids[i] = newIDs[j]
		}
	}
	for i, j := range dupOf {
		ids[i] = ids[j]
	}
	return ids, nil
}

// dedup sorts envs into the envelopes to insert (fresh, with their input
// positions pos) and the ones already stored (their ids written into ids)
// or repeated within envs (dupOf maps such a position to the first one).
func (s *Store) dedup(tx *gorm.DB, envs []ports.NewStoredEnvelope, ids []uint64) (fresh []ports.NewStoredEnvelope, pos []int, dupOf map[int]int, err error) {
	first := map[string]int{}
	dupOf = map[int]int{}
	for i, e := range envs {
		if e.DedupKey == nil {
			fresh, pos = append(fresh, e), append(pos, i)
			continue
		}
		k := strconv.Itoa(len(e.Topic)) + ":" + string(e.Topic) + string(e.DedupKey)
		if j, ok := first[k]; ok {
			dupOf[i] = j
			continue
		}
		var stored []int64
		err := tx.Table("delivery_envelopes").Where("topic = ? AND dedup_key = ?", blob(e.Topic), blob(e.DedupKey)).
			Limit(1).Pluck("sequence_id", &stored).Error
		if err != nil {
			return nil, nil, nil, fmt.Errorf("look up dedup key: %w", err)
		}
		if len(stored) > 0 {
			ids[i] = uint64(stored[0])
			first[k] = i
			continue
		}
		first[k] = i
		fresh, pos = append(fresh, e), append(pos, i)
	}
	return fresh, pos, dupOf, nil
}

// insert takes the ids of envs from SQLite's counter and inserts them.
func (s *Store) insert(tx *gorm.DB, envs []ports.NewStoredEnvelope) ([]uint64, error) {
	seen := make(map[string]bool)
	topics := make([]string, 0, 1)
	for _, e := range envs {
		if !seen[string(e.Topic)] {
			seen[string(e.Topic)] = true
			topics = append(topics, string(e.Topic))
		}
	}
	sort.Strings(topics)
	ids, err := takeIDsSQLite(tx, topics, envs)
	if err != nil {
		return nil, err
	}
	rows := make([]envelopeRow, len(envs))
	for i, e := range envs {
		rows[i] = envelopeRow{
			Topic: e.Topic, SequenceID: int64(ids[i]), ServerTimestampNS: e.ServerTimestampNS,
			ExpiresAtNS: e.ExpiresAtNS, Envelope: e.Envelope, DedupKey: e.DedupKey,
		}
	}
	if err := tx.CreateInBatches(rows, 200).Error; err != nil {
		return nil, err
	}
	return ids, nil
}

// takeIDsSQLite raises the shared counter by the batch's size and records
// each topic's highest id. The writer's transaction already excludes every
// other writer, so no topic lock is needed first.
func takeIDsSQLite(tx *gorm.DB, topics []string, envs []ports.NewStoredEnvelope) ([]uint64, error) {
	var last int64
	err := tx.Raw(`UPDATE delivery_sequence SET last_id = last_id + ? WHERE id = 1 RETURNING last_id`, len(envs)).Row().Scan(&last)
	if err != nil {
		return nil, fmt.Errorf("take sequence ids: %w", err)
	}
	ids := make([]uint64, len(envs))
	highest := make(map[string]int64, len(topics))
	for i, e := range envs {
		id := last - int64(len(envs)) + 1 + int64(i)
		ids[i] = uint64(id)
		highest[string(e.Topic)] = id
	}
	for _, t := range topics {
		err := tx.Exec(`INSERT INTO delivery_topics (topic, last_id) VALUES (?, ?)
			ON CONFLICT (topic) DO UPDATE SET last_id = excluded.last_id`, blob(t), highest[t]).Error
		if err != nil {
			return nil, fmt.Errorf("record highest id: %w", err)
		}
	}
	return ids, nil
}

// rangeSQL reads a page under a byte budget in one statement (on
// PostgreSQL, whose client would otherwise receive every row of the
// LIMIT): the inner query takes the ids and lengths of up to limit
// envelopes after the cursor (LENGTH of a TOASTed value reads only its
// header), the window sums the lengths, and only the rows within the
// budget (and always the first) are joined to their envelope.
const rangeSQL = `SELECT e.topic, e.sequence_id, e.server_timestamp_ns, e.envelope, e.pending
FROM (SELECT w.sequence_id, w.len, SUM(w.len) OVER (ORDER BY w.sequence_id ROWS UNBOUNDED PRECEDING) AS run
	FROM (SELECT sequence_id, LENGTH(envelope) AS len FROM delivery_envelopes
		WHERE topic = ? AND sequence_id > ? ORDER BY sequence_id LIMIT ?) AS w) AS c
JOIN delivery_envelopes e ON e.topic = ? AND e.sequence_id = c.sequence_id
WHERE c.run <= ? OR c.run = c.len
ORDER BY e.sequence_id`

// Range implements [ports.EnvelopeStore.Range].
func (s *Store) Range(ctx context.Context, topic []byte, after uint64, limit, maxBytes int) ([]ports.StoredEnvelope, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 || maxBytes <= 0 {
		return nil, fmt.Errorf("range: %w: limit %d, byte budget %d", ports.ErrInvalidArgument, limit, maxBytes)
	}
	if after > math.MaxInt64 {
		return nil, nil // no id is that high: a stored id is a signed 64-bit integer
	}
	var out []ports.StoredEnvelope
	var err error
	if s.dialect == "postgres" {
		var rows []envelopeRow
		err = s.db.WithContext(ctx).Raw(rangeSQL, blob(topic), int64(after), limit, blob(topic), int64(maxBytes)).Scan(&rows).Error
		for _, r := range rows {
			out = append(out, toStored(r))
		}
	} else {
		out, err = s.rangeStepping(ctx, topic, after, limit, maxBytes)
	}
	if err != nil {
		return nil, s.fail(ctx, "range envelopes", "range", err)
	}
	return out, nil
}

// rangeStepping reads the page row by row and stops at the budget. SQLite
// runs in this process and produces a row only when asked for it, so the
// rows after the one that crosses the budget are never read.
func (s *Store) rangeStepping(ctx context.Context, topic []byte, after uint64, limit, maxBytes int) ([]ports.StoredEnvelope, error) {
	rows, err := s.db.WithContext(ctx).Raw(`SELECT sequence_id, server_timestamp_ns, envelope, pending FROM delivery_envelopes
		WHERE topic = ? AND sequence_id > ? ORDER BY sequence_id LIMIT ?`, blob(topic), int64(after), limit).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ports.StoredEnvelope
	size := 0
	for rows.Next() {
		var id, ts, pending int64
		var env []byte
		if err := rows.Scan(&id, &ts, &env, &pending); err != nil {
			return nil, err
		}
		if size += len(env); size > maxBytes && len(out) > 0 {
			break
		}
		out = append(out, ports.StoredEnvelope{Topic: topic, SequenceID: uint64(id), ServerTimestampNS: ts, Envelope: env, Pending: pending != 0})
	}
	return out, rows.Err()
}

func toStored(r envelopeRow) ports.StoredEnvelope {
	return ports.StoredEnvelope{
		Topic: r.Topic, SequenceID: uint64(r.SequenceID),
		ServerTimestampNS: r.ServerTimestampNS, Envelope: r.Envelope, Pending: r.Pending != 0,
	}
}

// Newest implements [ports.EnvelopeStore.Newest].
func (s *Store) Newest(ctx context.Context, topic []byte) (ports.StoredEnvelope, error) {
	if err := s.check(ctx); err != nil {
		return ports.StoredEnvelope{}, err
	}
	var rows []envelopeRow
	// A pending commit's GroupInfo is not the topic's newest until its
	// commit is confirmed (acceptance.go): readers of the newest want the
	// current epoch's.
	err := s.db.WithContext(ctx).Where("topic = ? AND pending = 0", blob(topic)).Order("sequence_id DESC").Limit(1).Find(&rows).Error
	if err != nil {
		return ports.StoredEnvelope{}, s.fail(ctx, "newest envelope", "newest", err)
	}
	if len(rows) == 0 {
		return ports.StoredEnvelope{}, fmt.Errorf("newest envelope: %w: topic is empty", ports.ErrNotFound)
	}
	return toStored(rows[0]), nil
}

// Highest implements [ports.EnvelopeStore.Highest].
func (s *Store) Highest(ctx context.Context, topic []byte) (uint64, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	var last []int64
	err := s.db.WithContext(ctx).Table("delivery_topics").Where("topic = ?", blob(topic)).Pluck("last_id", &last).Error
	if err != nil {
		return 0, s.fail(ctx, "highest sequence id", "highest", err)
	}
	if len(last) == 0 {
		return 0, nil
	}
	return uint64(last[0]), nil
}

// DeleteExpired implements [ports.EnvelopeStore.DeleteExpired].
func (s *Store) DeleteExpired(ctx context.Context, nowNS int64) (int64, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	if s.writeMu != nil {
		s.writeMu.Lock()
		defer s.writeMu.Unlock()
	}
	res := s.db.WithContext(ctx).Where("expires_at_ns <> 0 AND expires_at_ns <= ?", nowNS).Delete(&envelopeRow{})
	if res.Error != nil {
		return 0, s.fail(ctx, "delete expired", "delete_expired", res.Error)
	}
	return res.RowsAffected, nil
}

// Close closes the database. It is safe to call more than once.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.group != nil {
		s.group.stop()
	}
	return s.sqlDB.Close()
}
