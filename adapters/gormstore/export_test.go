package gormstore

import (
	"context"

	"github.com/regroup-mls/regroup/ports"
)

// SQLiteSyncLevel reads PRAGMA synchronous inside tx, a transaction of a
// SQLite store.
func SQLiteSyncLevel(ctx context.Context, t ports.Tx) (n int, err error) {
	err = t.(*tx).q(ctx).Raw("PRAGMA synchronous").Scan(&n).Error
	return n, err
}
