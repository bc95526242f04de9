package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/regroup-mls/regroup/internal/lockfile"
)

// schemaLockKey is the PostgreSQL advisory lock regroupd replicas hold,
// one at a time, while they create the schema and apply its migrations.
var schemaLockKey = func() int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("regroupd schema migrations"))
	return int64(h.Sum64())
}()

// withSchemaLock runs open while holding the database's schema lock, so
// that replicas started together on a fresh database take turns creating
// the schema instead of racing (CREATE SCHEMA IF NOT EXISTS and the
// migrations are not safe to run concurrently). The lock is a session
// lock on a connection of its own, released by closing it.
func withSchemaLock(ctx context.Context, dsn string, open func() error) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect for the schema lock: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, schemaLockKey); err != nil {
		return fmt.Errorf("take the schema lock: %w", err)
	}
	err = open()
	_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, schemaLockKey)
	return err
}

// withSQLiteLock runs open while holding an exclusive lock on the file
// path+".lock", so that replicas started together on one fresh SQLite
// file take turns switching it to WAL and migrating it: SQLite answers a
// journal-mode change that races another connection with "database is
// locked" at once, without waiting its busy timeout. A turn waits at most
// until ctx ends or sqliteLockWait passes.
func withSQLiteLock(ctx context.Context, path string, open func() error) error {
	ctx, cancel := context.WithTimeout(ctx, sqliteLockWait)
	defer cancel()
	for {
		l, err := lockfile.Acquire(path + ".lock")
		if err == nil {
			defer func() { _ = l.Release() }()
			return open()
		}
		if !errors.Is(err, lockfile.ErrHeld) {
			return fmt.Errorf("take the schema lock: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("take the schema lock: %w (waited %v)", err, sqliteLockWait)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// sqliteLockWait bounds the wait for another replica's migrations.
const sqliteLockWait = 30 * time.Second
