package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/ports"
)

// Operator checks: what regroupd refuses at start, what it logs about the
// limits in effect, and where its default database lives
// (docs/operations.md, COMP-346 to COMP-349).

// postgresOnly are the flags that mean nothing on SQLite, with their
// environment variables.
var postgresOnly = map[string]string{
	"postgres-schema":  "REGROUPD_POSTGRES_SCHEMA",
	"postgres-notify":  "REGROUPD_POSTGRES_NOTIFY",
	"postgres-writers": "REGROUPD_POSTGRES_WRITERS",
	"postgres-conns":   "REGROUPD_POSTGRES_CONNS",
}

// checkConfig refuses values regroupd would otherwise replace or ignore
// silently: a value that disables what it limits, a negative duration, a
// log level slog does not know, PostgreSQL-only flags on SQLite, and a
// SQLite path that cannot hold a database.
func checkConfig(c config) error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if _, err := parseLevel(c.LogLevel); err != nil {
		bad("-log-level: %v", err)
	}
	positive := map[string]int{"max-envelope-bytes": c.MaxEnvelopeBytes, "max-batch": c.MaxBatch,
		"burst": c.Burst, "identity-burst": c.IdentityBurst, "global-burst": c.GlobalBurst}
	if c.postgres() {
		positive["postgres-writers"], positive["postgres-conns"] = c.PostgresWriters, c.PostgresConns
	}
	for name, v := range positive {
		if v <= 0 {
			bad("-%s %d: must be positive", name, v)
		}
	}
	// Counts and rates where a negative value means no limit: 0 would
	// refuse everything, which no operator means.
	for name, v := range map[string]float64{"rate": c.RatePerSecond, "identity-rate": c.IdentityRate, "global-rate": c.GlobalRate,
		"max-connections": float64(c.MaxConnections), "max-connections-per-identity": float64(c.MaxConnectionsPerIdentity),
		"max-subscriptions": float64(c.MaxSubscriptions), "max-subscriptions-per-connection": float64(c.MaxSubscriptionsPerConnection),
		"max-subscriptions-per-identity": float64(c.MaxSubscriptionsPerIdentity), "max-cursors-per-connection": float64(c.MaxCursorsPerConnection),
		"max-cursors-per-identity": float64(c.MaxCursorsPerIdentity)} {
		if v == 0 {
			bad("-%s 0 would refuse every call: give a positive limit, or a negative value for no limit", name)
		}
	}
	for name, d := range map[string]time.Duration{"shutdown-timeout": c.ShutdownTimeout, "retention-sweep-interval": c.SweepInterval,
		"slow-reader-timeout": c.SlowReaderTimeout, "max-connection-idle": c.MaxConnectionIdle} {
		if d <= 0 {
			bad("-%s %v: must be positive", name, d)
		}
	}
	if c.PollInterval < 0 {
		bad("-poll-interval %v: must be 0 (never) or positive", c.PollInterval)
	}
	for kind, d := range c.Retention {
		if d < 0 {
			bad("-retention-%s %v: must be 0 (keep for ever) or positive", retentionFlag[kind], d)
		}
	}
	if !c.postgres() {
		for name, env := range postgresOnly {
			if c.set[name] {
				bad("-%s (or %s) applies to PostgreSQL only; -database is a SQLite file", name, env)
			}
		}
		if err := checkSQLitePath(c.Database); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// parseLevel parses -log-level: debug, info, warn or error.
func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("%q is not debug, info, warn or error", s)
}

// checkSQLitePath reports, in words, why path cannot be a SQLite
// database, before the driver reports it as "out of memory" (SQLite's
// SQLITE_CANTOPEN, 14, through the driver).
func checkSQLitePath(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return fmt.Errorf("-database %s is a directory: give a file path in it, e.g. %s", path, filepath.Join(path, "regroupd.db"))
	case err == nil:
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("-database %s cannot be opened for writing: %w", path, err)
		}
		return f.Close()
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("-database %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	di, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("-database %s: its directory %s does not exist: create it (owned by regroupd's user, mode 0700)", path, dir)
	case err != nil:
		return fmt.Errorf("-database %s: directory %s: %w", path, dir, err)
	case !di.IsDir():
		return fmt.Errorf("-database %s: %s is not a directory", path, dir)
	}
	probe, err := os.CreateTemp(dir, ".regroupd-probe-*")
	if err != nil {
		return fmt.Errorf("-database %s: cannot create files in %s (SQLite needs its journal there too): %w", path, dir, err)
	}
	probe.Close()
	return os.Remove(probe.Name())
}

// retentionFlag names the -retention-* flag of each topic kind.
var retentionFlag = map[ports.TopicKind]string{ports.TopicGroupMessages: "group-messages", ports.TopicWelcomes: "welcomes",
	ports.TopicIdentityUpdates: "identity-updates", ports.TopicKeyPackages: "key-packages"}

// defaultDatabase is -database's default: regroupd.db in systemd's
// $STATE_DIRECTORY, else in $XDG_STATE_HOME/regroupd, else in
// ~/.local/state/regroupd — never the working directory, which changes
// with how regroupd is started. A regroupd.db left in the working
// directory by an older default is used, with a warning, rather than
// silently starting on an empty database.
func defaultDatabase() (path string, legacy bool) {
	if _, err := os.Stat("regroupd.db"); err == nil {
		if abs, err := filepath.Abs("regroupd.db"); err == nil {
			return abs, true
		}
	}
	if d := os.Getenv("STATE_DIRECTORY"); d != "" {
		return filepath.Join(strings.Split(d, ":")[0], "regroupd.db"), false
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "regroupd", "regroupd.db"), false
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "state", "regroupd", "regroupd.db"), false
	}
	return "regroupd.db", false
}

// prepareDefaultDatabase creates the default database's directory
// (owner-only) when -database was not given, and says which database
// regroupd uses.
func prepareDefaultDatabase(c config, log *slog.Logger) error {
	if c.set["database"] {
		return nil
	}
	if c.legacyDatabase {
		log.Warn("using regroupd.db in the working directory, the former default; pass -database to choose it explicitly",
			"database", c.Database)
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(c.Database), 0o700); err != nil {
		return fmt.Errorf("default database directory: %w", err)
	}
	return nil
}

// limitsInEffect are the values regroupd runs with, logged once at start
// so that an operator sees what a flag, its environment variable or the
// default chose.
func limitsInEffect(c config) []any {
	return []any{
		"max_envelope_bytes", c.MaxEnvelopeBytes, "max_batch", c.MaxBatch, "max_page_bytes", c.MaxPageBytes,
		"read_budget_bytes", c.ReadBudgetBytes,
		"rate", c.RatePerSecond, "burst", c.Burst, "identity_rate", c.IdentityRate, "identity_burst", c.IdentityBurst,
		"global_rate", c.GlobalRate, "global_burst", c.GlobalBurst,
		"max_connections", c.MaxConnections, "max_connections_per_identity", c.MaxConnectionsPerIdentity,
		"max_streams_per_connection", c.MaxStreamsPerConnection,
		"max_subscriptions", c.MaxSubscriptions, "max_subscriptions_per_connection", c.MaxSubscriptionsPerConnection,
		"max_subscriptions_per_identity", c.MaxSubscriptionsPerIdentity,
		"max_cursors", c.MaxCursorsPerSubscription, "max_cursors_per_connection", c.MaxCursorsPerConnection,
		"max_cursors_per_identity", c.MaxCursorsPerIdentity,
		"slow_reader_timeout", c.SlowReaderTimeout.String(), "max_connection_idle", c.MaxConnectionIdle.String(),
		"shutdown_timeout", c.ShutdownTimeout.String(), "poll_interval", c.PollInterval.String(),
		"retention_group_messages", c.Retention[ports.TopicGroupMessages].String(),
		"retention_welcomes", c.Retention[ports.TopicWelcomes].String(),
		"retention_identity_updates", c.Retention[ports.TopicIdentityUpdates].String(),
		"retention_key_packages", c.Retention[ports.TopicKeyPackages].String(),
		"check_key_packages", c.CheckKeyPackages, "accept_commits", c.AcceptCommits,
		"quota_window", c.Fair.QuotaWindow.String(), "quota_replicas", c.Fair.QuotaReplicas,
		"quota_bytes_per_replica", quotaBytes(c),
	}
}

// quotaBytes names each storage quota one replica enforces, in bytes.
func quotaBytes(c config) map[string]int64 {
	out := map[string]int64{}
	for kind, q := range c.Fair.delivery(&delivery.Options{}).Quotas {
		out[delivery.KindName([]byte{byte(kind)})] = q.Bytes
	}
	return out
}
