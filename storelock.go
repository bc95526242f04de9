package regroup

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5"

	"github.com/regroup-mls/regroup/internal/lockfile"
)

// ErrStoreInUse reports a client store another client has open. A store
// is one installation's MLS state: two clients advancing it at once fork
// the installation out of its groups, so [OpenSQLiteStore] and
// [OpenPostgresStore] (and so [NewEmbedded] and [NewNetworked]) take an
// exclusive lock on the store for as long as it is open and refuse a
// second opener, in this process or another.
var ErrStoreInUse = errors.New("client store in use by another client")

// lockSQLiteStore takes the lock of the SQLite store at path: a lock
// file beside it, path+".lock", holding the holder's process id. The
// error wraps [ErrStoreInUse] and a *lockfile.HeldError naming the
// holder when another client has it.
func lockSQLiteStore(path string) (func(), error) {
	l, err := lockfile.Acquire(path + ".lock")
	if errors.Is(err, lockfile.ErrHeld) {
		return nil, fmt.Errorf("%w: %s: %w", ErrStoreInUse, path, err)
	}
	if err != nil {
		return nil, err
	}
	return func() { _ = l.Release() }, nil
}

// lockPostgresStore takes a session-level advisory lock, keyed by the
// database and schema, on a connection of its own that it holds until
// the returned release is called. PostgreSQL releases the lock when that
// connection ends, so a client that dies leaves no lock behind.
func lockPostgresStore(ctx context.Context, dsn, schema string) (func(), error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("lock postgres store: %w", err)
	}
	var db, current string
	if err := conn.QueryRow(ctx, `SELECT current_database(), current_schema()`).Scan(&db, &current); err != nil {
		_ = conn.Close(ctx)
		return nil, fmt.Errorf("lock postgres store: %w", err)
	}
	if schema == "" {
		schema = current
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte("regroup client store\x00" + db + "\x00" + schema))
	key := int64(h.Sum64())
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&got); err != nil {
		_ = conn.Close(ctx)
		return nil, fmt.Errorf("lock postgres store: %w", err)
	}
	if !got {
		_ = conn.Close(ctx)
		return nil, fmt.Errorf("%w: schema %q of database %q (advisory lock %d)", ErrStoreInUse, schema, db, key)
	}
	return func() { _ = conn.Close(context.Background()) }, nil
}
