package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// config is everything regroupd is started with. Each flag's default comes
// from the environment variable named in its usage, then from the built-in
// default.
type config struct {
	Listen         string
	HealthListen   string
	Database       string
	PostgresSchema string
	TLSCert        string
	TLSKey         string

	MaxEnvelopeBytes int
	MaxBatch         int
	RatePerSecond    float64
	Burst            int
	Retention        map[ports.TopicKind]time.Duration
	SweepInterval    time.Duration
	ShutdownTimeout  time.Duration
	PollInterval     time.Duration
	PostgresNotify   bool
	// CheckKeyPackages applies RFC 9420 §10.1 and JOIN-090 to published
	// key packages; off, only structural checks apply.
	CheckKeyPackages bool

	LogFormat string
	LogLevel  string
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

func parseConfig(args []string) (config, error) {
	fs := flag.NewFlagSet("regroupd", flag.ContinueOnError)
	var c config
	str := func(p *string, name, env, def, usage string) {
		fs.StringVar(p, name, envOr(env, def), usage+" (env "+env+")")
	}
	var retention [4]string
	var maxEnv, maxBatch, burst, rate, sweep, shutdown, poll, notify, checkKP string
	str(&c.Listen, "listen", "REGROUPD_LISTEN", "127.0.0.1:5050", "gRPC listen address")
	str(&c.HealthListen, "health-listen", "REGROUPD_HEALTH_LISTEN", "127.0.0.1:5051", "HTTP health endpoint address, empty to disable")
	str(&c.Database, "database", "REGROUPD_DATABASE", "regroupd.db", "SQLite file path, or a PostgreSQL DSN (postgres://… or key=value with host=)")
	str(&c.PostgresSchema, "postgres-schema", "REGROUPD_POSTGRES_SCHEMA", "", "PostgreSQL schema for the tables, created if missing")
	str(&c.TLSCert, "tls-cert", "REGROUPD_TLS_CERT", "", "TLS certificate file (PEM); with -tls-key enables TLS")
	str(&c.TLSKey, "tls-key", "REGROUPD_TLS_KEY", "", "TLS private key file (PEM)")
	str(&maxEnv, "max-envelope-bytes", "REGROUPD_MAX_ENVELOPE_BYTES", "1048576", "largest accepted envelope")
	str(&maxBatch, "max-batch", "REGROUPD_MAX_BATCH", "256", "most envelopes in one publish")
	str(&rate, "rate", "REGROUPD_RATE", "1000", "calls per second per connection, negative for no limit")
	str(&burst, "burst", "REGROUPD_BURST", "2000", "burst of calls per connection")
	str(&retention[0], "retention-group-messages", "REGROUPD_RETENTION_GROUP_MESSAGES", "0", "how long group messages are kept, 0 forever")
	str(&retention[1], "retention-welcomes", "REGROUPD_RETENTION_WELCOMES", "0", "how long welcomes are kept, 0 forever")
	str(&retention[2], "retention-identity-updates", "REGROUPD_RETENTION_IDENTITY_UPDATES", "0", "how long identity updates are kept, 0 forever")
	str(&retention[3], "retention-key-packages", "REGROUPD_RETENTION_KEY_PACKAGES", "0", "how long key packages are kept, 0 forever")
	str(&sweep, "retention-sweep-interval", "REGROUPD_RETENTION_SWEEP_INTERVAL", "1m", "how often expired envelopes are deleted")
	str(&shutdown, "shutdown-timeout", "REGROUPD_SHUTDOWN_TIMEOUT", "10s", "how long a graceful shutdown waits for calls in flight")
	str(&poll, "poll-interval", "REGROUPD_POLL_INTERVAL", "0", "how often subscriptions re-read their topics unprompted, 0 never")
	str(&notify, "postgres-notify", "REGROUPD_POSTGRES_NOTIFY", "false", "NOTIFY appends so several regroupd sharing one PostgreSQL database wake each other's subscribers")
	str(&checkKP, "check-key-packages", "REGROUPD_CHECK_KEY_PACKAGES", "true", "validate published key packages (RFC 9420 §10.1, JOIN-090) with the built-in MLS engine")
	str(&c.LogFormat, "log-format", "REGROUPD_LOG_FORMAT", "json", "json or text")
	str(&c.LogLevel, "log-level", "REGROUPD_LOG_LEVEL", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var err error
	geti := func(name, v string) int {
		n, e := strconv.Atoi(v)
		if e != nil && err == nil {
			err = fmt.Errorf("-%s: %q is not an integer", name, v)
		}
		return n
	}
	getd := func(name, v string) time.Duration {
		d, e := time.ParseDuration(v)
		if e != nil && err == nil {
			err = fmt.Errorf("-%s: %q is not a duration", name, v)
		}
		return d
	}
	c.MaxEnvelopeBytes = geti("max-envelope-bytes", maxEnv)
	c.MaxBatch = geti("max-batch", maxBatch)
	c.Burst = geti("burst", burst)
	if r, e := strconv.ParseFloat(rate, 64); e != nil {
		return c, fmt.Errorf("-rate: %q is not a number", rate)
	} else {
		c.RatePerSecond = r
	}
	c.Retention = map[ports.TopicKind]time.Duration{
		ports.TopicGroupMessages:   getd("retention-group-messages", retention[0]),
		ports.TopicWelcomes:        getd("retention-welcomes", retention[1]),
		ports.TopicIdentityUpdates: getd("retention-identity-updates", retention[2]),
		ports.TopicKeyPackages:     getd("retention-key-packages", retention[3]),
	}
	c.SweepInterval = getd("retention-sweep-interval", sweep)
	c.ShutdownTimeout = getd("shutdown-timeout", shutdown)
	c.PollInterval = getd("poll-interval", poll)
	if b, e := strconv.ParseBool(checkKP); e != nil {
		return c, fmt.Errorf("-check-key-packages: %q is not a boolean", checkKP)
	} else {
		c.CheckKeyPackages = b
	}
	if b, e := strconv.ParseBool(notify); e != nil {
		return c, fmt.Errorf("-postgres-notify: %q is not a boolean", notify)
	} else {
		c.PostgresNotify = b
	}
	if err != nil {
		return c, err
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return c, fmt.Errorf("-tls-cert and -tls-key go together")
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		return c, fmt.Errorf("-log-format: %q is neither json nor text", c.LogFormat)
	}
	if fs.NArg() != 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return c, nil
}
