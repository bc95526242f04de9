// Package sqlite is the embedded default [ports.Store]: one SQLite file,
// opened with a pure-Go driver (no cgo), in WAL mode with a busy timeout,
// foreign keys, full synchronous commits and secure delete. A relaxed
// transaction ([ports.RelaxedStore]) commits with synchronous NORMAL: a
// killed process keeps it, a power loss may lose it (COMP-553).
//
// Transactions are serialized: the store holds a single connection, so
// transactions of one process queue for it (honouring their contexts),
// and those queued together share one database transaction and its
// commit, each in a savepoint of its own (group commit, COMP-550); every
// database transaction begins with BEGIN IMMEDIATE, so a second process on the
// same file waits up to the busy timeout for the write lock instead of
// failing when it upgrades a read to a write. Consequently a Tx started
// from inside another Tx's fn on the same store waits for a connection that
// the outer one holds, until its context ends: do not nest transactions.
//
// # Errors
//
// A transaction that still finds the write lock held when the busy timeout
// runs out fails with an error wrapping [ports.ErrConflict]: it may succeed
// when retried. Other failures follow [ports.Store].
package sqlite

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"time"

	gosqlite "github.com/glebarez/go-sqlite"
	gsqlite "github.com/glebarez/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/regroup-mls/regroup/adapters/gormstore"
	"github.com/regroup-mls/regroup/ports"
)

// ErrBadPath reports a database path Open cannot use.
var ErrBadPath = errors.New("bad sqlite path")

// Options tune Open; the zero value (or nil) is the default.
type Options struct {
	// BusyTimeout is how long a transaction waits for another process's
	// write lock before it fails with ports.ErrConflict; 0 means 5 seconds.
	BusyTimeout time.Duration
	// Logger receives gorm's SQL log; nil discards it.
	Logger logger.Interface
}

// Store is a [ports.Store] on one SQLite file.
type Store = gormstore.Store

var _ ports.Store = (*Store)(nil)

// Open opens (creating if needed) the SQLite database at path and migrates
// it to the current schema. Close the store to release the file.
func Open(ctx context.Context, path string, o *Options) (*Store, error) {
	if o == nil {
		o = &Options{}
	}
	if path == "" || strings.ContainsAny(path, "?#") || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("open sqlite %q: %w", path, ErrBadPath)
	}
	busy := o.BusyTimeout
	if busy <= 0 {
		busy = 5 * time.Second
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "secure_delete(1)")
	q.Set("_txlock", "immediate")
	dsn := path + "?" + q.Encode()
	// Another process (or goroutine) creating the same file can hold it
	// while this one switches it to WAL, which SQLite reports as busy
	// without waiting; retry that, within the busy timeout.
	deadline := time.Now().Add(busy)
	for {
		s, err := openOnce(ctx, path, dsn, o)
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return s, err
		}
		t := time.NewTimer(time.Duration(5+rand.IntN(20)) * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("open sqlite %s: %w: %w", path, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// isBusy reports whether err is SQLite's SQLITE_BUSY or SQLITE_LOCKED.
func isBusy(err error) bool {
	var se *gosqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	code := se.Code() & 0xff
	return code == 5 || code == 6
}

func openOnce(ctx context.Context, path, dsn string, o *Options) (*Store, error) {
	log := o.Logger
	if log == nil {
		log = logger.Discard
	}
	db, err := gorm.Open(gsqlite.Open(dsn), &gorm.Config{
		Logger:                 log,
		SkipDefaultTransaction: true,
		// Statements are compiled once per connection and reused: without
		// the cache SQLite parses every statement again, which cost about
		// a sixth of a client's CPU. The LRU bound keeps statements built
		// from variable-length lists from growing it without end.
		PrepareStmt:        true,
		PrepareStmtMaxSize: 256,
	})
	if err != nil {
		if db != nil {
			if sqlDB, e := db.DB(); e == nil {
				sqlDB.Close()
			}
		}
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	sqlDB.SetMaxOpenConns(1)
	sqlDB.SetMaxIdleConns(1)
	sqlDB.SetConnMaxLifetime(0)
	sqlDB.SetConnMaxIdleTime(0)
	if err := sqlDB.PingContext(ctx); err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	// A lock still held when the busy timeout ran out is a lost race that
	// may succeed later: the waiting already happened, so it is reported
	// at once as a conflict rather than retried here.
	//
	// Transactions of this process run one at a time on the one
	// connection anyway, so concurrent ones share a database transaction
	// and its commit (group commit: one fsync of the WAL for all). A
	// relaxed transaction (ports.RelaxedTx) commits with synchronous
	// NORMAL: its WAL frames are written, so a killed process keeps it,
	// but not synced; the next FULL commit's sync carries them.
	s, err := gormstore.New(ctx, db, gormstore.Dialect{Name: "sqlite", Retryable: isBusy, MaxAttempts: 1,
		GroupCommit: true, Relax: "PRAGMA synchronous=NORMAL", Unrelax: "PRAGMA synchronous=FULL"}, sqlDB.Close)
	if err != nil {
		sqlDB.Close()
		return nil, err
	}
	return s, nil
}
