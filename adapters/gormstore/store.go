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
	// GroupCommit runs concurrent transactions of this process together,
	// in one database transaction with one commit (see committer), for a
	// database that runs one transaction at a time anyway (SQLite's one
	// connection): they share the synchronous write of the commit.
	GroupCommit bool
	// Relax is the statement that lets a transaction commit without
	// waiting for stable storage ([ports.RelaxedStore]); empty, every
	// commit waits. It runs first inside the transaction, unless Unrelax
	// is set: then Relax is a setting of the connection, run before the
	// transaction begins, and Unrelax restores the durable default after
	// its commit (which needs the store's one connection: GroupCommit).
	Relax, Unrelax string
}

// Store is a [ports.Store] on a gorm database.
type Store struct {
	db      *gorm.DB
	d       Dialect
	closed  atomic.Bool
	onClose func() error
	stmts   stmtCache
	// group queues transactions with Dialect.GroupCommit; unrelaxPending
	// is set when restoring durable commits after a relaxed transaction
	// failed, so the next durable one restores them first.
	group          committer
	unrelaxPending atomic.Bool
	commits        atomic.Uint64
}

// Commits returns how many database transactions the store has committed
// since it opened: with group commit, fewer than the Tx calls that
// succeeded. For tests and benchmarks.
func (s *Store) Commits() uint64 { return s.commits.Load() }

// Queued returns how many transactions wait in the group-commit queue
// for their turn. For tests.
func (s *Store) Queued() int {
	s.group.mu.Lock()
	defer s.group.mu.Unlock()
	return len(s.group.queue)
}

var (
	_ ports.Store        = (*Store)(nil)
	_ ports.MessageTx    = (*tx)(nil)
	_ ports.RelaxedStore = (*Store)(nil)
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
// With [Dialect.GroupCommit], fn may share its database transaction and
// commit with the transactions of other goroutines (committer).
func (s *Store) Tx(ctx context.Context, fn func(tx ports.Tx) error) error {
	if s.d.GroupCommit {
		if s.closed.Load() {
			return fmt.Errorf("%s store: tx: %w", s.d.Name, ports.ErrClosed)
		}
		return s.groupTx(ctx, fn, false)
	}
	return s.txLoop(ctx, fn, false)
}

// TxRelaxed implements [ports.RelaxedStore]: Tx with a commit that need
// not wait for the disk, when the dialect has a Relax statement. With
// GroupCommit, it shares a database transaction only with other relaxed
// ones: a group is relaxed or durable as a whole.
func (s *Store) TxRelaxed(ctx context.Context, fn func(tx ports.Tx) error) error {
	relaxed := s.d.Relax != "" && (s.d.Unrelax == "" || s.d.GroupCommit)
	if s.d.GroupCommit {
		if s.closed.Load() {
			return fmt.Errorf("%s store: tx: %w", s.d.Name, ports.ErrClosed)
		}
		return s.groupTx(ctx, fn, relaxed)
	}
	return s.txLoop(ctx, fn, relaxed)
}

// txLoop runs fn in a transaction of its own, retrying as Tx says.
func (s *Store) txLoop(ctx context.Context, fn func(tx ports.Tx) error, relaxed bool) error {
	for attempt := 1; ; attempt++ {
		if s.closed.Load() {
			return fmt.Errorf("%s store: tx: %w", s.d.Name, ports.ErrClosed)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s store: tx: %w", s.d.Name, err)
		}
		err := s.once(ctx, fn, relaxed)
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

func (s *Store) once(ctx context.Context, fn func(tx ports.Tx) error, relaxed bool) error {
	db, err := s.begin(ctx, relaxed)
	if err != nil {
		return fmt.Errorf("%s store: begin: %w", s.d.Name, withCtx(ctx, err))
	}
	finished := false
	defer func() {
		if !finished { // fn panicked: roll back, let the panic continue
			s.end(db, relaxed, false)
		}
	}()
	err = fn(&tx{db: db, s: s})
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		finished = true
		s.end(db, relaxed, false)
		return err
	}
	finished = true
	if err := s.end(db, relaxed, true); err != nil {
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

// begin begins a database transaction, relaxed or durable.
func (s *Store) begin(ctx context.Context, relaxed bool) (*gorm.DB, error) {
	perConn := s.d.Unrelax != ""
	if !relaxed && s.unrelaxPending.Load() {
		if err := s.db.WithContext(ctx).Exec(s.d.Unrelax).Error; err != nil {
			return nil, err
		}
		s.unrelaxPending.Store(false)
	}
	if relaxed && perConn {
		if err := s.db.WithContext(ctx).Exec(s.d.Relax).Error; err != nil {
			return nil, err
		}
	}
	db := s.db.WithContext(ctx).Begin(s.d.TxOptions)
	if db.Error != nil {
		s.unrelax(relaxed)
		return nil, db.Error
	}
	if relaxed && !perConn {
		if err := db.Exec(s.d.Relax).Error; err != nil {
			db.Rollback()
			return nil, err
		}
	}
	return db, nil
}

// end commits db (or rolls it back) and, after a relaxed transaction
// whose setting belongs to the connection, restores the durable default.
func (s *Store) end(db *gorm.DB, relaxed, commit bool) error {
	var err error
	if commit {
		if err = db.Commit().Error; err == nil {
			s.commits.Add(1)
		}
	} else {
		db.Rollback()
	}
	s.unrelax(relaxed)
	return err
}

// unrelax restores durable commits on the connection after a relaxed
// transaction. Should that fail, the next durable transaction restores
// them before it begins, or does not begin.
func (s *Store) unrelax(relaxed bool) {
	if !relaxed || s.d.Unrelax == "" {
		return
	}
	if err := s.db.Exec(s.d.Unrelax).Error; err != nil {
		s.unrelaxPending.Store(true)
	}
}

// tx implements ports.Tx on one gorm transaction of store s.
type tx struct {
	db *gorm.DB
	s  *Store
	// detached: the transaction carries other callers' writes too (group
	// commit), so a caller's context ending must not interrupt its
	// statements, which some drivers answer by rolling back the whole
	// transaction; the committer checks the context between fns instead.
	detached bool
}

// ctx returns the context t's statements run under.
func (t *tx) ctx(ctx context.Context) context.Context {
	if t.detached {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

func (t *tx) q(ctx context.Context) *gorm.DB { return t.db.WithContext(t.ctx(ctx)) }

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
