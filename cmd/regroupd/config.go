package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/ports"
)

// config is everything regroupd is started with. Each flag's default comes
// from the environment variable named in its usage, then from the built-in
// default. docs/operations.md lists every limit with its default and
// metric.
type config struct {
	Listen         string
	HealthListen   string
	Database       string
	PostgresSchema string
	TLSCert        string
	TLSKey         string

	MaxEnvelopeBytes int
	MaxBatch         int
	Retention        map[ports.TopicKind]time.Duration
	SweepInterval    time.Duration
	ShutdownTimeout  time.Duration
	PollInterval     time.Duration
	PostgresNotify   bool
	// PostgresWriters and PostgresConns size the PostgreSQL store
	// (deliverydb.Options.Writers and MaxOpenConns).
	PostgresWriters, PostgresConns int
	// Pprof serves net/http/pprof under /debug/pprof/ on the health
	// listener.
	Pprof bool
	// CheckKeyPackages applies RFC 9420 §10.1 and JOIN-090 to published
	// key packages; off, only structural checks apply.
	CheckKeyPackages bool
	// AcceptCommits turns commit acceptance on (acceptance.go): commits
	// are checked against their groups' public state (COMP-376).
	AcceptCommits bool
	// PublicCacheBytes bounds commit acceptance's cache of decoded public
	// states, in bytes of their encoding; negative keeps none (COMP-380).
	PublicCacheBytes int
	// TwoPhase runs commit acceptance in two phases (needs
	// AcceptCommits): commits by inboxes that are not super admins wait
	// for a witness (COMP-410). GracePeriod (0: none) and PendingExpiry
	// are its timers; OwnerJoinLimit is how long a super admin's resync
	// or recovery join waits for its inbox's other installations.
	TwoPhase                                   bool
	GracePeriod, PendingExpiry, OwnerJoinLimit time.Duration
	// CatchUpWindow is how long a group a restore put in catch-up stays
	// in it without taking an uploaded commit (COMP-493).
	CatchUpWindow time.Duration

	// Reads.
	MaxPageBytes    int
	ReadBudgetBytes int64
	// MemoryLimit keeps the Go runtime's soft memory limit at the
	// configured budgets (COMP-337).
	MemoryLimit bool
	// Rates, in tokens per second (negative: no limit), and bursts.
	RatePerSecond, IdentityRate, GlobalRate float64
	Burst, IdentityBurst, GlobalBurst       int
	// Counts (negative: no limit).
	MaxConnections, MaxConnectionsPerIdentity                                    int
	MaxStreamsPerConnection                                                      int
	MaxSubscriptions, MaxSubscriptionsPerConnection, MaxSubscriptionsPerIdentity int
	MaxCursorsPerSubscription, MaxCursorsPerConnection, MaxCursorsPerIdentity    int
	SlowReaderTimeout, MaxConnectionIdle                                         time.Duration

	LogFormat string
	LogLevel  string

	Fair fairConfig // limits.go

	// Version prints the build and exits.
	Version bool
	// set names the flags given on the line or by their environment
	// variable (operator.go); legacyDatabase reports the default database
	// found in the working directory.
	set            map[string]bool
	legacyDatabase bool
}

func (c config) postgres() bool {
	return strings.HasPrefix(c.Database, "postgres://") || strings.HasPrefix(c.Database, "postgresql://") ||
		strings.Contains(c.Database, "host=")
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// boolValue is a real boolean flag (-postgres-notify alone means true)
// whose default may come from the environment.
type boolValue struct{ p *bool }

func (b boolValue) String() string {
	if b.p == nil {
		return "false"
	}
	return strconv.FormatBool(*b.p)
}
func (b boolValue) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("%q is not a boolean", s)
	}
	*b.p = v
	return nil
}
func (boolValue) IsBoolFlag() bool { return true }

func parseConfig(args []string) (config, error) {
	fs := flag.NewFlagSet("regroupd", flag.ContinueOnError)
	var c config
	var err error
	str := func(p *string, name, env, def, usage string) {
		fs.StringVar(p, name, envOr(env, def), usage+" (env "+env+")")
	}
	// Typed flags take their default from the environment; a malformed
	// environment value is reported like a malformed flag.
	envErr := func(name, env, v, what string) {
		if err == nil {
			err = fmt.Errorf("-%s: %s=%q is not %s", name, env, v, what)
		}
	}
	boolean := func(p *bool, name, env string, def bool, usage string) {
		*p = def
		if v, ok := os.LookupEnv(env); ok {
			b, e := strconv.ParseBool(v)
			if e != nil {
				envErr(name, env, v, "a boolean")
			}
			*p = b
		}
		fs.Var(boolValue{p}, name, usage+" (env "+env+")")
	}
	integer := func(p *int, name, env string, def int, usage string) {
		*p = def
		if v, ok := os.LookupEnv(env); ok {
			n, e := strconv.Atoi(v)
			if e != nil {
				envErr(name, env, v, "an integer")
			}
			*p = n
		}
		fs.IntVar(p, name, *p, usage+" (env "+env+")")
	}
	number := func(p *float64, name, env string, def float64, usage string) {
		*p = def
		if v, ok := os.LookupEnv(env); ok {
			n, e := strconv.ParseFloat(v, 64)
			if e != nil {
				envErr(name, env, v, "a number")
			}
			*p = n
		}
		fs.Float64Var(p, name, *p, usage+" (env "+env+")")
	}
	duration := func(p *time.Duration, name, env string, def time.Duration, usage string) {
		*p = def
		if v, ok := os.LookupEnv(env); ok {
			d, e := time.ParseDuration(v)
			if e != nil {
				envErr(name, env, v, "a duration")
			}
			*p = d
		}
		fs.DurationVar(p, name, *p, usage+" (env "+env+")")
	}
	var retention [4]time.Duration
	var budgetMiB int
	str(&c.Listen, "listen", "REGROUPD_LISTEN", "127.0.0.1:5050", "gRPC listen address")
	str(&c.HealthListen, "health-listen", "REGROUPD_HEALTH_LISTEN", "127.0.0.1:5051", "HTTP health and metrics address (/healthz, /metrics), empty to disable")
	defDB, legacy := defaultDatabase()
	str(&c.Database, "database", "REGROUPD_DATABASE", defDB, "SQLite file path, or a PostgreSQL DSN (postgres://… or key=value with host=); "+
		"default regroupd.db in $STATE_DIRECTORY, else $XDG_STATE_HOME/regroupd, else ~/.local/state/regroupd")
	str(&c.PostgresSchema, "postgres-schema", "REGROUPD_POSTGRES_SCHEMA", "", "PostgreSQL schema for the tables, created if missing")
	str(&c.TLSCert, "tls-cert", "REGROUPD_TLS_CERT", "", "TLS certificate file (PEM); with -tls-key enables TLS")
	str(&c.TLSKey, "tls-key", "REGROUPD_TLS_KEY", "", "TLS private key file (PEM)")
	integer(&c.MaxEnvelopeBytes, "max-envelope-bytes", "REGROUPD_MAX_ENVELOPE_BYTES", 1<<20, "largest accepted envelope")
	integer(&c.MaxBatch, "max-batch", "REGROUPD_MAX_BATCH", 256, "most envelopes in one publish")
	duration(&retention[0], "retention-group-messages", "REGROUPD_RETENTION_GROUP_MESSAGES", 0, "how long group messages are kept, 0 forever")
	duration(&retention[1], "retention-welcomes", "REGROUPD_RETENTION_WELCOMES", 30*24*time.Hour, "how long welcomes are kept (COMP-325), 0 forever")
	duration(&retention[2], "retention-identity-updates", "REGROUPD_RETENTION_IDENTITY_UPDATES", 0, "how long identity updates are kept, 0 forever")
	duration(&retention[3], "retention-key-packages", "REGROUPD_RETENTION_KEY_PACKAGES", 0, "how long key packages are kept, 0 forever")
	duration(&c.SweepInterval, "retention-sweep-interval", "REGROUPD_RETENTION_SWEEP_INTERVAL", time.Minute, "how often expired envelopes are deleted")
	duration(&c.ShutdownTimeout, "shutdown-timeout", "REGROUPD_SHUTDOWN_TIMEOUT", 10*time.Second, "how long a graceful shutdown waits for calls in flight")
	duration(&c.PollInterval, "poll-interval", "REGROUPD_POLL_INTERVAL", 0, "how often subscriptions re-read their topics unprompted, 0 never")
	boolean(&c.PostgresNotify, "postgres-notify", "REGROUPD_POSTGRES_NOTIFY", false, "NOTIFY appends so several regroupd sharing one PostgreSQL database wake each other's subscribers")
	integer(&c.PostgresWriters, "postgres-writers", "REGROUPD_POSTGRES_WRITERS", 2, "PostgreSQL statements that append groups of publishes at once")
	integer(&c.PostgresConns, "postgres-conns", "REGROUPD_POSTGRES_CONNS", 16, "PostgreSQL connections this process opens at most (writers, reads, the watch's own one aside)")
	boolean(&c.Pprof, "pprof", "REGROUPD_PPROF", false, "serve Go profiles under /debug/pprof/ on the health listener (keep that listener private)")
	boolean(&c.CheckKeyPackages, "check-key-packages", "REGROUPD_CHECK_KEY_PACKAGES", true, "validate published key packages (RFC 9420 §10.1, JOIN-090) with the built-in MLS engine")
	boolean(&c.AcceptCommits, "accept-commits", "REGROUPD_ACCEPT_COMMITS", false, "follow every registered group's public state and refuse commits and GroupInfos that fail public validation or the role policy (commit acceptance)")
	boolean(&c.TwoPhase, "two-phase", "REGROUPD_TWO_PHASE", false, "with -accept-commits, take commits by inboxes that are not super admins in two phases: pending until a witness reports (ADR-0030)")
	duration(&c.GracePeriod, "grace-period", "REGROUPD_GRACE_PERIOD", 10*time.Second, "with -two-phase, time from a pending commit's first report to its confirmation; 0 confirms on the first OK")
	duration(&c.CatchUpWindow, "catch-up-window", "REGROUPD_CATCH_UP_WINDOW", 10*time.Minute, "with -accept-commits, time a group a restore put in catch-up stays in it without taking an uploaded commit")
	duration(&c.OwnerJoinLimit, "owner-join-limit", "REGROUPD_OWNER_JOIN_LIMIT", 10*time.Minute, "with -two-phase, time after which a super admin's resync or recovery join that waits for the inbox's other installations in the group takes effect when none of them reported")
	duration(&c.PendingExpiry, "pending-expiry", "REGROUPD_PENDING_EXPIRY", 72*time.Hour, "with -two-phase, time after which a pending commit without reports expires")
	integer(&c.PublicCacheBytes, "public-cache-bytes", "REGROUPD_PUBLIC_CACHE_BYTES", mls.DefaultPublicCacheBytes, "with -accept-commits, bytes of encoded public state whose decoded groups are kept between commits; negative keeps none")
	integer(&c.MaxPageBytes, "max-page-bytes", "REGROUPD_MAX_PAGE_BYTES", 2<<20, "stored bytes one query page or subscription read holds (at least one envelope)")
	boolean(&c.MemoryLimit, "memory-limit", "REGROUPD_MEMORY_LIMIT", true, "keep the Go runtime's soft memory limit at start-up memory + read budget + public-state cache + 1.25 MiB per open connection (GOMEMLIMIT, when set, wins)")
	integer(&budgetMiB, "read-budget-mib", "REGROUPD_READ_BUDGET_MIB", 256, "MiB of stored envelopes all reads together may hold in memory")
	number(&c.RatePerSecond, "rate", "REGROUPD_RATE", 1000, "tokens per second per connection (a call costs 1, plus 1 per envelope and per 64 KiB moved), negative for no limit")
	integer(&c.Burst, "burst", "REGROUPD_BURST", 2000, "token bucket size per connection")
	number(&c.IdentityRate, "identity-rate", "REGROUPD_IDENTITY_RATE", 4000, "tokens per second per installation key over all its connections, negative for no limit")
	integer(&c.IdentityBurst, "identity-burst", "REGROUPD_IDENTITY_BURST", 8000, "token bucket size per installation key")
	number(&c.GlobalRate, "global-rate", "REGROUPD_GLOBAL_RATE", 20000, "tokens per second for the whole server, negative for no limit")
	integer(&c.GlobalBurst, "global-burst", "REGROUPD_GLOBAL_BURST", 40000, "token bucket size for the whole server")
	integer(&c.MaxConnections, "max-connections", "REGROUPD_MAX_CONNECTIONS", 1024, "open connections, negative for no limit")
	integer(&c.MaxConnectionsPerIdentity, "max-connections-per-identity", "REGROUPD_MAX_CONNECTIONS_PER_IDENTITY", 8, "connections authenticated as one installation key, negative for no limit")
	integer(&c.MaxStreamsPerConnection, "max-streams-per-connection", "REGROUPD_MAX_STREAMS_PER_CONNECTION", 32, "calls in flight on one connection")
	integer(&c.MaxSubscriptions, "max-subscriptions", "REGROUPD_MAX_SUBSCRIPTIONS", 4096, "open subscriptions, negative for no limit")
	integer(&c.MaxSubscriptionsPerConnection, "max-subscriptions-per-connection", "REGROUPD_MAX_SUBSCRIPTIONS_PER_CONNECTION", 32, "open subscriptions of one connection, negative for no limit")
	integer(&c.MaxSubscriptionsPerIdentity, "max-subscriptions-per-identity", "REGROUPD_MAX_SUBSCRIPTIONS_PER_IDENTITY", 32, "open subscriptions of one installation key, negative for no limit")
	integer(&c.MaxCursorsPerSubscription, "max-cursors", "REGROUPD_MAX_CURSORS", 1024, "topics one subscription follows")
	integer(&c.MaxCursorsPerConnection, "max-cursors-per-connection", "REGROUPD_MAX_CURSORS_PER_CONNECTION", 24576, "topics one connection's subscriptions follow together, negative for no limit")
	integer(&c.MaxCursorsPerIdentity, "max-cursors-per-identity", "REGROUPD_MAX_CURSORS_PER_IDENTITY", 24576, "topics one installation key's subscriptions follow together, negative for no limit")
	duration(&c.SlowReaderTimeout, "slow-reader-timeout", "REGROUPD_SLOW_READER_TIMEOUT", 30*time.Second, "close the connection of a subscriber that takes no envelope for this long")
	duration(&c.MaxConnectionIdle, "max-connection-idle", "REGROUPD_MAX_CONNECTION_IDLE", 5*time.Minute, "close a connection with no call in flight for this long")
	str(&c.LogFormat, "log-format", "REGROUPD_LOG_FORMAT", "json", "json or text")
	str(&c.LogLevel, "log-level", "REGROUPD_LOG_LEVEL", "info", "debug, info, warn or error")
	fairErr := c.Fair.register(fs)
	if err == nil {
		err = *fairErr
	}
	if err != nil {
		return c, err
	}
	fs.BoolVar(&c.Version, "version", false, "print the version and exit")
	fs.SetOutput(io.Discard) // a bad flag is reported once, by main
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stderr)
			fs.Usage()
		}
		return c, err
	}
	c.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { c.set[f.Name] = true })
	fs.VisitAll(func(f *flag.Flag) {
		if env, ok := strings.CutSuffix(f.Usage, ")"); ok {
			if i := strings.LastIndex(env, "(env "); i >= 0 {
				if _, ok := os.LookupEnv(env[i+5:]); ok {
					c.set[f.Name] = true
				}
			}
		}
	})
	c.legacyDatabase = legacy && !c.set["database"]
	c.ReadBudgetBytes = int64(budgetMiB) << 20
	c.Retention = map[ports.TopicKind]time.Duration{
		ports.TopicGroupMessages:   retention[0],
		ports.TopicWelcomes:        retention[1],
		ports.TopicIdentityUpdates: retention[2],
		ports.TopicKeyPackages:     retention[3],
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return c, fmt.Errorf("-tls-cert and -tls-key go together")
	}
	if c.TwoPhase && !c.AcceptCommits {
		return c, fmt.Errorf("-two-phase needs -accept-commits")
	}
	if c.CatchUpWindow <= 0 {
		return c, fmt.Errorf("-catch-up-window must be positive")
	}
	if c.GracePeriod < 0 || c.PendingExpiry <= 0 {
		return c, fmt.Errorf("-grace-period must not be negative and -pending-expiry must be positive")
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		return c, fmt.Errorf("-log-format: %q is neither json nor text", c.LogFormat)
	}
	if c.MaxStreamsPerConnection <= 0 || c.MaxCursorsPerSubscription <= 0 || c.MaxPageBytes <= 0 || budgetMiB <= 0 {
		return c, fmt.Errorf("-max-streams-per-connection, -max-cursors, -max-page-bytes and -read-budget-mib must be positive")
	}
	if err := c.Fair.check(c.ReadBudgetBytes); err != nil {
		return c, err
	}
	if fs.NArg() != 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return c, nil
}
