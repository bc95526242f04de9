package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	gosqlite "github.com/glebarez/go-sqlite"
	gsqlite "github.com/glebarez/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/regroup-mls/regroup/adapters/gormstore"
)

// Note is a table of the application's own, beside regroup's tables in
// the same database.
type Note struct {
	ID   uint `gorm:"primaryKey"`
	Text string
}

// AppDB is the application's database: one SQLite file it opens with its
// own gorm settings and shares with regroup.
type AppDB struct {
	DB    *gorm.DB
	Store *gormstore.Store // regroup's tables, migrated by gormstore.New
}

// OpenAppDB opens (creating) the SQLite file at path, migrates the
// application's tables and regroup's, and returns both.
func OpenAppDB(ctx context.Context, path string) (*AppDB, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Set("_txlock", "immediate")
	db, err := gorm.Open(gsqlite.Open(path+"?"+q.Encode()), &gorm.Config{
		Logger: logger.Discard, SkipDefaultTransaction: true,
	})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// One connection: SQLite has one writer, and transactions queue for it
	// instead of failing on a lock.
	sqlDB.SetMaxOpenConns(1)
	if err := db.WithContext(ctx).AutoMigrate(&Note{}); err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("migrate notes: %w", err)
	}
	store, err := gormstore.New(ctx, db, gormstore.Dialect{
		Name: "app-sqlite",
		// A write lock still held after the busy timeout: the whole
		// transaction may succeed when run again.
		Retryable:   isBusy,
		MaxAttempts: 3,
	}, sqlDB.Close)
	if err != nil {
		sqlDB.Close()
		return nil, err
	}
	return &AppDB{DB: db, Store: store}, nil
}

// isBusy reports SQLite's SQLITE_BUSY and SQLITE_LOCKED.
func isBusy(err error) bool {
	var se *gosqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	code := se.Code() & 0xff
	return code == 5 || code == 6
}
