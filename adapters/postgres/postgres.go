// Package postgres is the PostgreSQL [ports.Store], for deployments that
// outgrow one SQLite file. It reaches the server through pgx and
// gorm.io/driver/postgres, and shares every model, query and migration with
// the SQLite store through gormstore.
//
// Transactions run at SERIALIZABLE isolation, so concurrent transactions
// behave as if run one after the other. A transaction the server aborts
// with a serialization failure (SQLSTATE 40001) or a deadlock (40P01) is
// run again from the start, a bounded number of times; after that the error
// wraps [ports.ErrConflict].
package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	gpostgres "gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"database/sql"

	"github.com/regroup-mls/regroup/adapters/gormstore"
	"github.com/regroup-mls/regroup/ports"
)

// EnvDSN names the environment variable Open reads the DSN from when
// [Options.DSN] is empty.
const EnvDSN = "REGROUP_POSTGRES_DSN"

// ErrNoDSN reports that neither [Options.DSN] nor REGROUP_POSTGRES_DSN
// names a server.
var ErrNoDSN = errors.New("no PostgreSQL DSN: set Options.DSN or " + EnvDSN)

// ErrBadSchema reports a schema name that is not a plain lower-case SQL
// identifier.
var ErrBadSchema = errors.New("bad schema name")

// Options configure Open; nil means the defaults.
type Options struct {
	// DSN is a pgx connection string (URL or key=value); empty means the
	// value of REGROUP_POSTGRES_DSN.
	DSN string
	// Schema, when set, is created if absent and is the only schema on the
	// connections' search_path, so several stores share one database.
	// It must match [a-z_][a-z0-9_]{0,62}.
	Schema string
	// MaxAttempts bounds how many times a transaction runs when the server
	// keeps aborting it with 40001 or 40P01; 0 means 10.
	MaxAttempts int
	// MaxOpenConns bounds the connection pool; 0 means 8.
	MaxOpenConns int
	// Logger receives gorm's SQL log; nil discards it.
	Logger logger.Interface
}

// Store is a [ports.Store] on a PostgreSQL database.
type Store = gormstore.Store

var _ ports.Store = (*Store)(nil)

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Open connects to the server, creates the schema when one is named, and
// migrates the database to the current schema version.
func Open(ctx context.Context, o *Options) (*Store, error) {
	if o == nil {
		o = &Options{}
	}
	dsn := o.DSN
	if dsn == "" {
		dsn = os.Getenv(EnvDSN)
	}
	if dsn == "" {
		return nil, fmt.Errorf("open postgres: %w", ErrNoDSN)
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres: parse DSN: %w", err)
	}
	if o.Schema != "" {
		if !schemaName.MatchString(o.Schema) {
			return nil, fmt.Errorf("open postgres: schema %q: %w", o.Schema, ErrBadSchema)
		}
		if err := createSchema(ctx, cfg.Copy(), o.Schema); err != nil {
			return nil, err
		}
		cfg.RuntimeParams["search_path"] = `"` + o.Schema + `"`
	}
	sqlDB := stdlib.OpenDB(*cfg)
	conns := o.MaxOpenConns
	if conns <= 0 {
		conns = 8
	}
	sqlDB.SetMaxOpenConns(conns)
	sqlDB.SetMaxIdleConns(conns)
	log := o.Logger
	if log == nil {
		log = logger.Discard
	}
	db, err := gorm.Open(gpostgres.New(gpostgres.Config{Conn: sqlDB}), &gorm.Config{
		Logger:                 log,
		SkipDefaultTransaction: true,
	})
	if err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	s, err := gormstore.New(ctx, db, Dialect(o.MaxAttempts), sqlDB.Close)
	if err != nil {
		sqlDB.Close()
		return nil, err
	}
	return s, nil
}

// Dialect returns the PostgreSQL hooks for gormstore: SERIALIZABLE
// transactions, retries of 40001 and 40P01, and an advisory lock that keeps
// two processes from migrating the same schema at once.
func Dialect(maxAttempts int) gormstore.Dialect {
	return gormstore.Dialect{
		Name:        "postgres",
		TxOptions:   &sql.TxOptions{Isolation: sql.LevelSerializable},
		Retryable:   Retryable,
		MaxAttempts: maxAttempts,
		// A relaxed transaction (ports.RelaxedStore) commits without
		// waiting for the server's WAL flush: the server keeps it unless
		// it crashes within about three wal_writer_delay (COMP-553).
		Relax: "SET LOCAL synchronous_commit TO OFF",
		LockMigrations: func(tx *gorm.DB) error {
			return tx.Exec("SELECT pg_advisory_xact_lock(hashtext(current_schema()))").Error
		},
	}
}

// Retryable reports whether err carries a serialization failure (40001)
// or a deadlock (40P01), after which a transaction may succeed when run
// again from the start.
func Retryable(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return pgErr.Code == "40001" || pgErr.Code == "40P01"
}

func createSchema(ctx context.Context, cfg *pgx.ConnConfig, schema string) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("open postgres: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS "`+schema+`"`); err != nil {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23505" { // a concurrent CREATE won
			return fmt.Errorf("open postgres: create schema %s: %w", schema, err)
		}
	}
	return nil
}
