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

// Setting reads a PostgreSQL setting inside tx, a transaction of a
// PostgreSQL store.
func Setting(ctx context.Context, t ports.Tx, name string) (v string, err error) {
	err = t.(*tx).q(ctx).Raw("SELECT current_setting(?)", name).Scan(&v).Error
	return v, err
}
