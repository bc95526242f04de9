// Package deliverydb is the delivery service's envelope database: a gorm
// implementation of [ports.EnvelopeStore] on SQLite (pure Go, WAL) and on
// PostgreSQL.
//
// # Sequence ids
//
// Each topic has a counter row. Append raises the counters of the batch's
// topics with one upsert each, in ascending topic order, inside the
// transaction that inserts the envelopes: on PostgreSQL the upsert locks
// the row until commit, so a second publisher to the topic waits, gets the
// next ids, and commits after the first. Envelope n is therefore visible
// before n+1, and a rolled-back batch releases its ids unused. On SQLite
// one writer commits every append queued meanwhile in one transaction
// (group commit), so one fsync serves many publishers.
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
	"sort"
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
	// group runs SQLite's writer, which commits appends in groups; nil on
	// PostgreSQL, where appends to different topics commit in parallel
	// and those to one topic queue on its counter row.
	group  *groupCommitter
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

// Append implements [ports.EnvelopeStore.Append]. On SQLite, appends that
// arrive while the writer is committing are committed together in its
// next transaction (group commit), each inside its own savepoint so that
// one failing append does not fail the others.
func (s *Store) Append(ctx context.Context, envs []ports.NewStoredEnvelope) ([]uint64, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if len(envs) == 0 {
		return nil, nil
	}
	if s.group != nil {
		return s.group.append(ctx, envs)
	}
	var ids []uint64
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		ids, err = s.appendIn(tx, envs)
		return err
	})
	if err != nil {
		return nil, dbErr(ctx, "append envelopes", err)
	}
	return ids, nil
}

// appendIn raises the counters of the batch's topics and inserts the
// envelopes inside tx, returning their ids in input order.
func (s *Store) appendIn(tx *gorm.DB, envs []ports.NewStoredEnvelope) ([]uint64, error) {
	// Count per topic, then lock counters in ascending topic order so two
	// batches naming the same topics cannot deadlock.
	counts := make(map[string]int64)
	for _, e := range envs {
		counts[string(e.Topic)]++
	}
	topics := make([]string, 0, len(counts))
	for t := range counts {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	next := make(map[string]int64, len(topics))
	for _, t := range topics {
		var last int64
		err := tx.Raw(`INSERT INTO delivery_topics (topic, last_id) VALUES (?, ?)
			ON CONFLICT (topic) DO UPDATE SET last_id = delivery_topics.last_id + excluded.last_id
			RETURNING last_id`, blob(t), counts[t]).Row().Scan(&last)
		if err != nil {
			return nil, err
		}
		next[t] = last - counts[t] + 1
	}
	ids := make([]uint64, len(envs))
	rows := make([]envelopeRow, len(envs))
	for i, e := range envs {
		id := next[string(e.Topic)]
		next[string(e.Topic)]++
		ids[i] = uint64(id)
		rows[i] = envelopeRow{
			Topic: e.Topic, SequenceID: id, ServerTimestampNS: e.ServerTimestampNS,
			ExpiresAtNS: e.ExpiresAtNS, Envelope: e.Envelope,
		}
	}
	if err := tx.CreateInBatches(rows, 200).Error; err != nil {
		return nil, err
	}
	if s.notify {
		if err := s.notifyTopics(func(q string, args ...any) error { return tx.Exec(q, args...).Error }, topics); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// Range implements [ports.EnvelopeStore.Range].
func (s *Store) Range(ctx context.Context, topic []byte, after uint64, limit int) ([]ports.StoredEnvelope, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("range: %w: limit %d", ports.ErrInvalidArgument, limit)
	}
	var rows []envelopeRow
	err := s.db.WithContext(ctx).Where("topic = ? AND sequence_id > ?", blob(topic), int64(after)).
		Order("sequence_id").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, dbErr(ctx, "range envelopes", err)
	}
	out := make([]ports.StoredEnvelope, len(rows))
	for i, r := range rows {
		out[i] = toStored(r)
	}
	return out, nil
}

func toStored(r envelopeRow) ports.StoredEnvelope {
	return ports.StoredEnvelope{
		Topic: r.Topic, SequenceID: uint64(r.SequenceID),
		ServerTimestampNS: r.ServerTimestampNS, Envelope: r.Envelope,
	}
}

// Newest implements [ports.EnvelopeStore.Newest].
func (s *Store) Newest(ctx context.Context, topic []byte) (ports.StoredEnvelope, error) {
	if err := s.check(ctx); err != nil {
		return ports.StoredEnvelope{}, err
	}
	var rows []envelopeRow
	err := s.db.WithContext(ctx).Where("topic = ?", blob(topic)).Order("sequence_id DESC").Limit(1).Find(&rows).Error
	if err != nil {
		return ports.StoredEnvelope{}, dbErr(ctx, "newest envelope", err)
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
		return 0, dbErr(ctx, "highest sequence id", err)
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
		return 0, dbErr(ctx, "delete expired", res.Error)
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
