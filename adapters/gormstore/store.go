// Package gormstore implements [ports.Store] on any database gorm reaches.
// The SQLite and PostgreSQL adapters open a *gorm.DB, describe their dialect
// in a [Dialect], and hand both to [New]; every model, query and migration
// is shared, so the two adapters keep the same behaviour.
//
// # Errors
//
// Lookups of absent rows wrap [ports.ErrNotFound]; records the schema cannot
// hold (an empty key, a number above the signed 64-bit range) wrap
// [ErrBadRecord]; a transaction that keeps losing races wraps
// [ports.ErrConflict]; calls after Close wrap [ports.ErrClosed].
package gormstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/regroup-mls/regroup/ports"
)

// ErrBadRecord reports a record the store refuses for what it holds: an
// empty key, or a sequence id above 2^63-1, which neither SQLite nor
// PostgreSQL integers hold.
var ErrBadRecord = errors.New("bad record")

// ErrSchemaTooNew reports a database migrated by a newer build of regroup
// than the one opening it.
var ErrSchemaTooNew = errors.New("database schema is newer than this build")

// Dialect carries what differs between databases. Every field is optional.
type Dialect struct {
	// Name names the database in error messages ("sqlite", "postgres").
	Name string
	// TxOptions are passed to BeginTx for every transaction.
	TxOptions *sql.TxOptions
	// Retryable reports whether err is a serialization failure or deadlock
	// after which the whole transaction may succeed when run again.
	Retryable func(err error) bool
	// MaxAttempts bounds how many times Tx runs fn when Retryable errors
	// keep occurring; 0 means 10.
	MaxAttempts int
	// LockMigrations runs first in the migration transaction, to keep two
	// processes from migrating the same database at once.
	LockMigrations func(tx *gorm.DB) error
}

// Store is a [ports.Store] on a gorm database.
type Store struct {
	db      *gorm.DB
	d       Dialect
	closed  atomic.Bool
	onClose func() error
	stmts   stmtCache
}

var (
	_ ports.Store     = (*Store)(nil)
	_ ports.MessageTx = (*tx)(nil)
)

// New migrates db to the current schema and returns a store on it. onClose,
// when not nil, is called once by Close (to close the connection pool).
func New(ctx context.Context, db *gorm.DB, d Dialect, onClose func() error) (*Store, error) {
	if d.MaxAttempts <= 0 {
		d.MaxAttempts = 10
	}
	db = db.Session(&gorm.Session{SkipDefaultTransaction: true, NewDB: true})
	s := &Store{db: db, d: d, onClose: onClose}
	if err := s.migrate(ctx); err != nil {
		return nil, fmt.Errorf("%s store: migrate: %w", d.Name, err)
	}
	if pool, err := db.DB(); err == nil {
		if err := s.stmts.prepare(ctx, pool, preparedQueries(db.Dialector.Name())...); err != nil {
			s.stmts.close()
			return nil, fmt.Errorf("%s store: prepare: %w", d.Name, err)
		}
	}
	return s, nil
}

// DB returns the underlying gorm database, for adapters' own maintenance
// and benchmarks; regroup code never uses it.
func (s *Store) DB() *gorm.DB { return s.db }

// Close releases the store; later calls return an error wrapping
// [ports.ErrClosed].
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return fmt.Errorf("%s store: close: %w", s.d.Name, ports.ErrClosed)
	}
	s.stmts.close()
	if s.onClose != nil {
		return s.onClose()
	}
	return nil
}

// Tx runs fn in one transaction, as [ports.Store.Tx] promises. A failure the
// dialect calls retryable reruns fn from the start after a short randomized
// pause, at most MaxAttempts times; then the error wraps [ports.ErrConflict].
func (s *Store) Tx(ctx context.Context, fn func(tx ports.Tx) error) error {
	for attempt := 1; ; attempt++ {
		if s.closed.Load() {
			return fmt.Errorf("%s store: tx: %w", s.d.Name, ports.ErrClosed)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s store: tx: %w", s.d.Name, err)
		}
		err := s.once(ctx, fn)
		if err == nil || s.d.Retryable == nil || !s.d.Retryable(err) {
			return err
		}
		if attempt >= s.d.MaxAttempts {
			return fmt.Errorf("%s store: tx: %w after %d attempts: %w", s.d.Name, ports.ErrConflict, attempt, err)
		}
		pause := time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 6)))
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s store: tx: %w", s.d.Name, ctx.Err())
		case <-t.C:
		}
	}
}

func (s *Store) once(ctx context.Context, fn func(tx ports.Tx) error) error {
	db := s.db.WithContext(ctx).Begin(s.d.TxOptions)
	if db.Error != nil {
		return fmt.Errorf("%s store: begin: %w", s.d.Name, withCtx(ctx, db.Error))
	}
	finished := false
	defer func() {
		if !finished { // fn panicked: roll back, let the panic continue
			db.Rollback()
		}
	}()
	err := fn(&tx{db: db, s: s})
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		finished = true
		db.Rollback()
		return err
	}
	finished = true
	if err := db.Commit().Error; err != nil {
		return fmt.Errorf("%s store: commit: %w", s.d.Name, withCtx(ctx, err))
	}
	return nil
}

// withCtx makes err wrap ctx's error too when ctx ended, so callers can test
// for context.Canceled whatever the driver reported.
func withCtx(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	return err
}

// fail wraps a query error with the operation, mapping gorm's not-found.
func fail(ctx context.Context, op string, err error) error {
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return fmt.Errorf("%s: %w", op, ports.ErrNotFound)
	}
	return fmt.Errorf("%s: %w", op, withCtx(ctx, err))
}

// tx implements ports.Tx on one gorm transaction of store s.
type tx struct {
	db *gorm.DB
	s  *Store
}

func (t *tx) q(ctx context.Context) *gorm.DB { return t.db.WithContext(ctx) }

func (t *tx) Groups() ports.Groups                         { return groups{t} }
func (t *tx) LocalCommitLog() ports.LocalCommitLog         { return localLog{t} }
func (t *tx) RemoteCommitLog() ports.RemoteCommitLog       { return remoteLog{t} }
func (t *tx) PublishProgress() ports.PublishProgress       { return publishProgress{t} }
func (t *tx) ReaderAdmission() ports.ReaderAdmission       { return readerAdmission{t} }
func (t *tx) KeyPackages() ports.KeyPackages               { return keyPackages{t} }
func (t *tx) HeldWelcomes() ports.HeldWelcomes             { return heldWelcomes{t} }
func (t *tx) Readds() ports.Readds                         { return readds{t} }
func (t *tx) ProcessedEnvelopes() ports.ProcessedEnvelopes { return processedEnvelopes{t} }
func (t *tx) IdentityCache() ports.IdentityCache           { return identityCache{t} }
func (t *tx) Blobs() ports.Blobs                           { return blobs{t} }

// Messages implements [ports.MessageTx].
func (t *tx) Messages() ports.Messages { return messages{t} }
