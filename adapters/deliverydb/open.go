package deliverydb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Options configures a [Store]. The zero value selects the defaults.
type Options struct {
	// Schema, on PostgreSQL, is the schema the tables live in; it is
	// created when missing. Empty uses the connection's search_path.
	Schema string
	// MaxOpenConns bounds the connection pool; default 16 on PostgreSQL,
	// 4 on SQLite.
	MaxOpenConns int
	// Notify, on PostgreSQL, makes every Append NOTIFY its topics so that
	// [Store.Watch] in other processes sharing the database reports them.
	// It costs a commit-time lock PostgreSQL takes for NOTIFY, so enable it
	// only when several delivery-service processes share the database.
	Notify bool
	// BusyTimeout is how long a SQLite writer waits for another process's
	// lock; default 10s.
	BusyTimeout time.Duration
	// Writers, on PostgreSQL, is how many group statements may append at
	// once, each on its own connection; default 2. The writers take
	// turns (COMP-540): normally one group runs at a time, which makes
	// the largest groups (the fewest statements per envelope); a second
	// starts beside it when a group has run for 20 ms, so appends keep
	// moving while a statement waits for a topic another process's append
	// holds.
	Writers int
	// Hooks receive the store's measurements (sequence-id waits, database
	// errors, retries) as they happen.
	Hooks Hooks
}

// OpenSQLite opens (creating if needed) the SQLite database file at path in
// WAL mode with synchronous=FULL, so that an acknowledged append survives a
// crash, and applies the migrations.
func OpenSQLite(ctx context.Context, path string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 10 * time.Second
	}
	if o.MaxOpenConns <= 0 {
		o.MaxOpenConns = 4
	}
	db, err := gorm.Open(sqlite.Open(sqliteDSN(path, o.BusyTimeout)), gormConfig())
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	st, err := finish(ctx, db, "sqlite", o.MaxOpenConns, &sync.Mutex{})
	if err != nil {
		return nil, err
	}
	st.hooks = o.Hooks
	st.group = newGroupCommitter(st, 1, sqliteCommit)
	return st, nil
}

// sqliteDSN is the connection string of the SQLite file at path with the
// store's durability settings.
func sqliteDSN(path string, busy time.Duration) string {
	return fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate",
		path, busy.Milliseconds())
}

// OpenPostgres connects to the PostgreSQL database dsn names (a URL or
// key=value DSN) and applies the migrations, in opts.Schema when set.
func OpenPostgres(ctx context.Context, dsn string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MaxOpenConns <= 0 {
		o.MaxOpenConns = 16
	}
	if o.Schema != "" {
		if !validIdent(o.Schema) {
			return nil, fmt.Errorf("open postgres: schema %q is not a plain identifier", o.Schema)
		}
		boot, err := gorm.Open(postgres.Open(dsn), gormConfig())
		if err != nil {
			return nil, fmt.Errorf("open postgres: %w", err)
		}
		err = boot.WithContext(ctx).Exec(`CREATE SCHEMA IF NOT EXISTS "` + o.Schema + `"`).Error
		if sqlDB, e := boot.DB(); e == nil {
			sqlDB.Close()
		}
		if err != nil {
			return nil, fmt.Errorf("open postgres: create schema: %w", err)
		}
		dsn = withSearchPath(dsn, o.Schema)
	}
	db, err := gorm.Open(postgres.Open(dsn), gormConfig())
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	st, err := finish(ctx, db, "postgres", o.MaxOpenConns, nil)
	if err != nil {
		return nil, err
	}
	st.schema, st.dsn, st.notify, st.hooks = o.Schema, dsn, o.Notify, o.Hooks
	if o.Writers <= 0 {
		o.Writers = 2
	}
	st.group = newGroupCommitter(st, min(o.Writers, o.MaxOpenConns), postgresCommit)
	st.group.gather = true
	return st, nil
}

func gormConfig() *gorm.Config {
	return &gorm.Config{Logger: logger.Default.LogMode(logger.Silent), SkipDefaultTransaction: true}
}

func finish(ctx context.Context, db *gorm.DB, dialect string, maxConns int, mu *sync.Mutex) (*Store, error) {
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dialect, err)
	}
	sqlDB.SetMaxOpenConns(maxConns)
	sqlDB.SetMaxIdleConns(maxConns)
	s := &Store{db: db, sqlDB: sqlDB, dialect: dialect, writeMu: mu}
	if err := migrate(ctx, db, dialect); err != nil {
		sqlDB.Close()
		return nil, err
	}
	return s, nil
}

func validIdent(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != "" && len(s) < 64
}

func withSearchPath(dsn, schema string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err == nil {
			q := u.Query()
			q.Set("search_path", schema)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return dsn + " search_path=" + schema
}

// migration is one schema step; versions apply in order, once each.
type migration struct {
	version          int
	sqlite, postgres []string
}

var migrations = []migration{{
	version: 1,
	sqlite: []string{
		`CREATE TABLE delivery_topics (topic BLOB PRIMARY KEY, last_id INTEGER NOT NULL)`,
		`CREATE TABLE delivery_envelopes (topic BLOB NOT NULL, sequence_id INTEGER NOT NULL,
			server_timestamp_ns INTEGER NOT NULL, expires_at_ns INTEGER NOT NULL DEFAULT 0,
			envelope BLOB NOT NULL, PRIMARY KEY (topic, sequence_id))`,
		`CREATE INDEX delivery_envelopes_expiry ON delivery_envelopes (expires_at_ns) WHERE expires_at_ns <> 0`,
	},
	postgres: []string{
		`CREATE TABLE delivery_topics (topic BYTEA PRIMARY KEY, last_id BIGINT NOT NULL)`,
		`CREATE TABLE delivery_envelopes (topic BYTEA NOT NULL, sequence_id BIGINT NOT NULL,
			server_timestamp_ns BIGINT NOT NULL, expires_at_ns BIGINT NOT NULL DEFAULT 0,
			envelope BYTEA NOT NULL, PRIMARY KEY (topic, sequence_id))`,
		`CREATE INDEX delivery_envelopes_expiry ON delivery_envelopes (expires_at_ns) WHERE expires_at_ns <> 0`,
	},
}, {
	// Version 2: one id counter shared by every topic (COMP-041). It
	// starts above the highest id any topic ever assigned (last_id covers
	// swept envelopes too), so no id is reused and every later id is
	// higher than every earlier one on any topic.
	version: 2,
	sqlite: []string{
		`CREATE TABLE delivery_sequence (id INTEGER PRIMARY KEY CHECK (id = 1), last_id INTEGER NOT NULL)`,
		`INSERT INTO delivery_sequence (id, last_id) SELECT 1, COALESCE(MAX(last_id), 0) FROM delivery_topics`,
	},
	postgres: []string{
		// CACHE 1: values increase in the order nextval is called, across
		// sessions, which API-289 needs (see the package doc).
		`CREATE SEQUENCE delivery_sequence_ids AS BIGINT MINVALUE 1 START WITH 1 CACHE 1 NO CYCLE`,
		`SELECT setval('delivery_sequence_ids', COALESCE(MAX(last_id), 0) + 1, false) FROM delivery_topics`,
		takeIDsFunction,
	},
}, {
	// Version 3: an envelope may carry a dedup key (commit-log entries: a
	// digest of what they sign); one topic stores each key once. Rows
	// stored before this version have none, so each of them may be stored
	// once more with its key, and never again.
	version: 3,
	sqlite: []string{
		`ALTER TABLE delivery_envelopes ADD COLUMN dedup_key BLOB`,
		`CREATE UNIQUE INDEX delivery_envelopes_dedup ON delivery_envelopes (topic, dedup_key) WHERE dedup_key IS NOT NULL`,
	},
	postgres: []string{
		`ALTER TABLE delivery_envelopes ADD COLUMN dedup_key BYTEA`,
		`CREATE UNIQUE INDEX delivery_envelopes_dedup ON delivery_envelopes (topic, dedup_key) WHERE dedup_key IS NOT NULL`,
	},
}, {
	// Version 4: PostgreSQL appends in one statement (appendFunction),
	// which a writer runs for a whole group of appends. The stored rows
	// are unchanged; SQLite has nothing to change.
	version:  4,
	sqlite:   []string{},
	postgres: []string{appendFunction},
}, {
	// Version 5: the public state of every group the service follows
	// (commit acceptance, see publicstate.go). Existing databases get the
	// empty table: their groups have no state until they register.
	version:  5,
	sqlite:   []string{publicStatesTable("BLOB", "INTEGER")},
	postgres: []string{publicStatesTable("BYTEA", "BIGINT")},
}, {
	// Version 6: commit acceptance in two phases (see acceptance.go): the
	// pending mark of stored envelopes, the commits that took two phases,
	// the reports on them and the groups' quarantines. Existing rows are
	// not pending; existing databases get empty tables.
	version:  6,
	sqlite:   acceptanceTables("BLOB", "INTEGER"),
	postgres: acceptanceTables("BYTEA", "BIGINT"),
}, {
	// Version 7: the record of restores from a backup and the groups a
	// restore put in catch-up (restore.go). Existing databases get empty
	// tables: nothing was restored with this build yet.
	version:  7,
	sqlite:   restoreTables("BLOB", "INTEGER"),
	postgres: restoreTables("BYTEA", "BIGINT"),
}, {
	// Version 8: the leave records of members' leave requests (see
	// leave.go). Existing databases get the empty table: no member had
	// left through the service before.
	version:  8,
	sqlite:   []string{leavesTable("BLOB", "INTEGER", "TEXT")},
	postgres: []string{leavesTable("BYTEA", "BIGINT", "TEXT")},
}, {
	// Version 9: what a group's catch-up after a restore keeps (catchup.go).
	// Groups in catch-up keep running; existing databases get an empty
	// table of taken commits.
	version:  9,
	sqlite:   catchUpTables("BLOB", "INTEGER"),
	postgres: catchUpTables("BYTEA", "BIGINT"),
}, {
	// Version 10: the installations blocked per group (block.go, ADR-0030
	// amendment rule 2). Existing databases get an empty table: nothing
	// was blocked before this version.
	version:  10,
	sqlite:   blockTables("BLOB", "INTEGER"),
	postgres: blockTables("BYTEA", "BIGINT"),
}}

// takeIDsFunction is Append's first step on PostgreSQL, in one round
// trip: lock the rows of the batch's topics in the order given (ascending),
// then take one id per envelope from the sequence, in call order, record
// each topic's highest id and return the ids in input order. topics_hex
// lists the topics comma-separated, each as "x" and its hex;
// envelope_topics gives, per envelope, the 1-based index of its topic in
// that list.
const takeIDsFunction = `CREATE FUNCTION delivery_take_ids(topics_hex text, envelope_topics integer[])
RETURNS SETOF bigint LANGUAGE plpgsql AS $fn$
DECLARE
	topics bytea[];
	ids bigint[];
	i integer;
BEGIN
	SELECT array_agg(decode(substr(h, 2), 'hex') ORDER BY o) INTO topics
		FROM unnest(string_to_array(topics_hex, ',')) WITH ORDINALITY AS x(h, o);
	FOR i IN 1..cardinality(topics) LOOP
		-- Lock the row; create (and so lock) it when the topic is new. A
		-- concurrent creator makes ON CONFLICT wait for it, then lock.
		PERFORM 1 FROM delivery_topics WHERE topic = topics[i] FOR UPDATE;
		IF NOT FOUND THEN
			INSERT INTO delivery_topics (topic, last_id) VALUES (topics[i], 0)
				ON CONFLICT (topic) DO UPDATE SET last_id = delivery_topics.last_id;
		END IF;
	END LOOP;
	FOR i IN 1..cardinality(envelope_topics) LOOP
		ids[i] := nextval('delivery_sequence_ids');
	END LOOP;
	IF cardinality(topics) = 1 THEN
		UPDATE delivery_topics SET last_id = ids[cardinality(ids)] WHERE topic = topics[1];
	ELSE
		UPDATE delivery_topics AS d SET last_id = m.last
			FROM (SELECT u.t, max(u.id) FROM unnest(envelope_topics, ids) AS u(t, id) GROUP BY u.t) AS m(t, last)
			WHERE d.topic = topics[m.t];
	END IF;
	RETURN QUERY SELECT unnest(ids);
END
$fn$`

// migrate applies every migration newer than the recorded version, each in
// its own transaction together with the version record.
func migrate(ctx context.Context, db *gorm.DB, dialect string) error {
	return migrateTo(ctx, db, dialect, migrations[len(migrations)-1].version)
}

// migrateTo applies the migrations up to version upTo.
func migrateTo(ctx context.Context, db *gorm.DB, dialect string, upTo int) error {
	db = db.WithContext(ctx)
	if err := db.Exec(`CREATE TABLE IF NOT EXISTS delivery_schema_version (version INTEGER NOT NULL)`).Error; err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, m := range migrations {
		if m.version > upTo {
			break
		}
		stmts := m.sqlite
		if dialect == "postgres" {
			stmts = m.postgres
		}
		err := db.Transaction(func(tx *gorm.DB) error {
			if dialect == "postgres" {
				// Two servers starting at once migrate one after the other.
				if err := tx.Exec(`LOCK TABLE delivery_schema_version IN EXCLUSIVE MODE`).Error; err != nil {
					return err
				}
			}
			var n int64
			if err := tx.Raw(`SELECT COUNT(*) FROM delivery_schema_version WHERE version >= ?`, m.version).Row().Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			for _, s := range stmts {
				if err := tx.Exec(s).Error; err != nil {
					return err
				}
			}
			return tx.Exec(`INSERT INTO delivery_schema_version (version) VALUES (?)`, m.version).Error
		})
		if err != nil {
			return fmt.Errorf("migrate to version %d: %w", m.version, err)
		}
	}
	return nil
}

// FreshSchemaName returns a random schema name for a test or a load run
// that wants an empty PostgreSQL schema of its own.
func FreshSchemaName() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "regroup_delivery_" + hex.EncodeToString(b)
}

// DropSchema drops the store's schema with everything in it (PostgreSQL
// with Options.Schema only; otherwise it does nothing).
func (s *Store) DropSchema(ctx context.Context) error {
	if s.dialect != "postgres" || s.schema == "" {
		return nil
	}
	return s.db.WithContext(ctx).Exec(`DROP SCHEMA IF EXISTS "` + s.schema + `" CASCADE`).Error
}
