package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/regroup-mls/regroup/adapters/grpctransport"
	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/ports"
)

// fairConfig holds the settings that share regroupd fairly between
// clients (docs/operations.md, "Fair shares"): limits per source address,
// read-budget shares, the outbound queue, storage quotas, the health
// listener's idle timeout, and extra gRPC listen addresses.
type fairConfig struct {
	MaxConnectionsPerAddress, MaxSubscriptionsPerAddress, MaxCursorsPerAddress int
	AnonymousSubscriptionsPerAddress, AnonymousCursorsPerAddress               int
	MaxCursorsTotal                                                            int
	AddressRate                                                                float64
	AddressBurst                                                               int
	// Read-budget shares in KiB (negative: none).
	ConnectionShareKiB, IdentityShareKiB, AddressShareKiB, AnonymousShareKiB int
	MaxQueuedKiB, MaxReadsPerConnection                                      int
	ResponseProgressTimeout                                                  time.Duration
	WindowKiB, ConnWindowKiB                                                 int
	KeyPackageCost, SignatureCost                                            int
	// Storage quotas per installation key, in MiB per QuotaWindow (0: none).
	QuotaWindow                                             time.Duration
	QuotaGroupMessages, QuotaWelcomes, QuotaIdentityUpdates int
	QuotaKeyPackages, QuotaCommitLog                        int
	// QuotaReplicas divides each quota: the quotas are the deployment's,
	// and each of this many replicas enforces its share (COMP-334).
	QuotaReplicas     int
	HealthIdleTimeout time.Duration
	ExtraListen       string
}

// register adds the fair-share flags to fs; each takes its default from
// its environment variable. The returned error pointer is set when such a
// variable is malformed.
func (f *fairConfig) register(fs *flag.FlagSet) *error {
	var err error
	env := func(name, envName, what string, parse func(string) error) {
		if v, ok := os.LookupEnv(envName); ok {
			if e := parse(v); e != nil && err == nil {
				err = fmt.Errorf("-%s: %s=%q is not %s", name, envName, v, what)
			}
		}
	}
	integer := func(p *int, name, envName string, def int, usage string) {
		*p = def
		env(name, envName, "an integer", func(v string) (e error) { *p, e = strconv.Atoi(v); return })
		fs.IntVar(p, name, *p, usage+" (env "+envName+")")
	}
	number := func(p *float64, name, envName string, def float64, usage string) {
		*p = def
		env(name, envName, "a number", func(v string) (e error) { *p, e = strconv.ParseFloat(v, 64); return })
		fs.Float64Var(p, name, *p, usage+" (env "+envName+")")
	}
	duration := func(p *time.Duration, name, envName string, def time.Duration, usage string) {
		*p = def
		env(name, envName, "a duration", func(v string) (e error) { *p, e = time.ParseDuration(v); return })
		fs.DurationVar(p, name, *p, usage+" (env "+envName+")")
	}
	integer(&f.MaxConnectionsPerAddress, "max-connections-per-address", "REGROUPD_MAX_CONNECTIONS_PER_ADDRESS", 64, "open connections from one address (IPv4, or IPv6 /64), negative for no limit")
	integer(&f.MaxSubscriptionsPerAddress, "max-subscriptions-per-address", "REGROUPD_MAX_SUBSCRIPTIONS_PER_ADDRESS", 256, "open subscriptions from one address, negative for no limit")
	integer(&f.MaxCursorsPerAddress, "max-cursors-per-address", "REGROUPD_MAX_CURSORS_PER_ADDRESS", 32768, "topics the subscriptions from one address follow together, negative for no limit")
	integer(&f.AnonymousSubscriptionsPerAddress, "anonymous-subscriptions-per-address", "REGROUPD_ANONYMOUS_SUBSCRIPTIONS_PER_ADDRESS", 16, "open subscriptions of unauthenticated connections from one address, negative for no limit")
	integer(&f.AnonymousCursorsPerAddress, "anonymous-cursors-per-address", "REGROUPD_ANONYMOUS_CURSORS_PER_ADDRESS", 1024, "topics the unauthenticated subscriptions from one address follow together, negative for no limit")
	integer(&f.MaxCursorsTotal, "max-cursors-total", "REGROUPD_MAX_CURSORS_TOTAL", 262144, "topics all open subscriptions follow together, negative for no limit")
	number(&f.AddressRate, "address-rate", "REGROUPD_ADDRESS_RATE", 2000, "tokens per second per address over all its connections, negative for no limit")
	integer(&f.AddressBurst, "address-burst", "REGROUPD_ADDRESS_BURST", 4000, "token bucket size per address")
	integer(&f.ConnectionShareKiB, "read-share-connection-kib", "REGROUPD_READ_SHARE_CONNECTION_KIB", 0, "KiB of the read budget one connection may hold, 0 for 1/16 of it, negative for no share")
	integer(&f.IdentityShareKiB, "read-share-identity-kib", "REGROUPD_READ_SHARE_IDENTITY_KIB", 0, "KiB of the read budget one installation key may hold, 0 for 1/8 of it, negative for no share")
	integer(&f.AddressShareKiB, "read-share-address-kib", "REGROUPD_READ_SHARE_ADDRESS_KIB", 0, "KiB of the read budget one address may hold, 0 for 1/4 of it, negative for no share")
	integer(&f.AnonymousShareKiB, "read-share-anonymous-kib", "REGROUPD_READ_SHARE_ANONYMOUS_KIB", 0, "KiB of the read budget the unauthenticated connections of one address may hold, 0 for 1/16 of it, negative for no share")
	integer(&f.MaxQueuedKiB, "max-queued-kib", "REGROUPD_MAX_QUEUED_KIB", 4<<10, "KiB of responses one connection may have queued and unwritten before its next read waits")
	integer(&f.MaxReadsPerConnection, "max-reads-per-connection", "REGROUPD_MAX_READS_PER_CONNECTION", 4, "Query and QueryNewest calls of one connection that read at once")
	duration(&f.ResponseProgressTimeout, "response-progress-timeout", "REGROUPD_RESPONSE_PROGRESS_TIMEOUT", 0, "close a connection whose queued responses write nothing for this long (0: the slow-reader timeout)")
	integer(&f.WindowKiB, "http2-window-kib", "REGROUPD_HTTP2_WINDOW_KIB", 64, "HTTP/2 receive window per stream, KiB")
	integer(&f.ConnWindowKiB, "http2-conn-window-kib", "REGROUPD_HTTP2_CONN_WINDOW_KIB", 1024, "HTTP/2 receive window per connection, KiB")
	integer(&f.KeyPackageCost, "key-package-cost", "REGROUPD_KEY_PACKAGE_COST", 16, "extra tokens a published key package costs for its admission checks")
	integer(&f.SignatureCost, "signature-cost", "REGROUPD_SIGNATURE_COST", 4, "extra tokens a published identity update or commit-log entry costs for its signature checks, negative for none")
	duration(&f.QuotaWindow, "quota-window", "REGROUPD_QUOTA_WINDOW", time.Hour, "window of the storage quotas")
	integer(&f.QuotaGroupMessages, "quota-group-messages-mib", "REGROUPD_QUOTA_GROUP_MESSAGES_MIB", 256, "MiB of group messages one installation stores per quota window, 0 for no quota")
	integer(&f.QuotaWelcomes, "quota-welcomes-mib", "REGROUPD_QUOTA_WELCOMES_MIB", 32, "MiB of Welcomes one installation stores per quota window, 0 for no quota")
	integer(&f.QuotaIdentityUpdates, "quota-identity-updates-mib", "REGROUPD_QUOTA_IDENTITY_UPDATES_MIB", 1, "MiB of identity updates one installation stores per quota window, 0 for no quota")
	integer(&f.QuotaKeyPackages, "quota-key-packages-mib", "REGROUPD_QUOTA_KEY_PACKAGES_MIB", 8, "MiB of key packages one installation stores per quota window, 0 for no quota")
	integer(&f.QuotaCommitLog, "quota-commit-log-mib", "REGROUPD_QUOTA_COMMIT_LOG_MIB", 64, "MiB of commit-log entries one installation stores per quota window, 0 for no quota")
	integer(&f.QuotaReplicas, "quota-replicas", "REGROUPD_QUOTA_REPLICAS", 1, "replicas sharing the database: each enforces 1/N of every storage quota, so an installation stores at most the quota over all of them")
	duration(&f.HealthIdleTimeout, "health-idle-timeout", "REGROUPD_HEALTH_IDLE_TIMEOUT", 30*time.Second, "close an idle keep-alive connection of the health listener after this long")
	fs.StringVar(&f.ExtraListen, "extra-listen", os.Getenv("REGROUPD_EXTRA_LISTEN"), "more gRPC listen addresses, comma-separated, served like -listen (env REGROUPD_EXTRA_LISTEN)")
	return &err
}

// check refuses settings that cannot work, and sets each read share left
// at 0 to its fraction of the read budget.
func (f *fairConfig) check(budget int64) error {
	for _, s := range []struct {
		p   *int
		div int64
	}{{&f.ConnectionShareKiB, 16}, {&f.IdentityShareKiB, 8}, {&f.AddressShareKiB, 4}, {&f.AnonymousShareKiB, 16}} {
		if *s.p == 0 {
			*s.p = int(budget / s.div >> 10)
		}
	}
	if f.QuotaReplicas < 1 {
		return fmt.Errorf("-quota-replicas %d: must be at least 1 (the replicas sharing the database)", f.QuotaReplicas)
	}
	if f.MaxQueuedKiB <= 0 || f.MaxReadsPerConnection <= 0 || f.WindowKiB < 64 || f.ConnWindowKiB < 64 || f.QuotaWindow <= 0 || f.HealthIdleTimeout <= 0 {
		return fmt.Errorf("-max-queued-kib and -max-reads-per-connection must be positive, -http2-window-kib and -http2-conn-window-kib at least 64 (HTTP/2's own), -quota-window and -health-idle-timeout positive")
	}
	return nil
}

func kib(n int) int64 {
	if n < 0 {
		return -1
	}
	return int64(n) << 10
}

// server adds the fair-share settings to o.
func (f *fairConfig) server(o *grpctransport.ServerOptions) *grpctransport.ServerOptions {
	o.MaxConnectionsPerAddress, o.MaxSubscriptionsPerAddress = f.MaxConnectionsPerAddress, f.MaxSubscriptionsPerAddress
	o.MaxCursorsPerAddress, o.MaxCursors = f.MaxCursorsPerAddress, f.MaxCursorsTotal
	o.AnonymousSubscriptionsPerAddress, o.AnonymousCursorsPerAddress = f.AnonymousSubscriptionsPerAddress, f.AnonymousCursorsPerAddress
	o.AddressRatePerSecond, o.AddressBurst = f.AddressRate, f.AddressBurst
	o.ConnectionReadShare, o.IdentityReadShare = kib(f.ConnectionShareKiB), kib(f.IdentityShareKiB)
	o.AddressReadShare, o.AnonymousReadShare = kib(f.AddressShareKiB), kib(f.AnonymousShareKiB)
	o.MaxQueuedBytesPerConnection, o.ResponseProgressTimeout = kib(f.MaxQueuedKiB), f.ResponseProgressTimeout
	o.InitialWindowSize, o.InitialConnWindowSize = int32(kib(f.WindowKiB)), int32(kib(f.ConnWindowKiB))
	o.KeyPackageCost, o.SignatureCost, o.MaxReadsPerConnection = f.KeyPackageCost, f.SignatureCost, f.MaxReadsPerConnection
	return o
}

// delivery adds the storage quotas to o.
func (f *fairConfig) delivery(o *delivery.Options) *delivery.Options {
	o.Quotas = map[ports.TopicKind]delivery.Quota{}
	for kind, mib := range map[ports.TopicKind]int{
		ports.TopicGroupMessages: f.QuotaGroupMessages, ports.TopicWelcomes: f.QuotaWelcomes,
		ports.TopicIdentityUpdates: f.QuotaIdentityUpdates, ports.TopicKeyPackages: f.QuotaKeyPackages,
		ports.TopicCommitLog: f.QuotaCommitLog,
		// GroupInfos beside commits: the group messages' figure, a
		// quota of their own.
		ports.TopicGroupInfo: f.QuotaGroupMessages,
	} {
		if mib > 0 {
			o.Quotas[kind] = delivery.Quota{Bytes: int64(mib) << 20 / int64(max(f.QuotaReplicas, 1)), Window: f.QuotaWindow}
		}
	}
	return o
}

// listenExtra serves the gRPC server on each extra address too.
func (s *server) listenExtra(addrs string) error {
	for _, a := range strings.Split(addrs, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		ln, err := net.Listen("tcp", a)
		if err != nil {
			return fmt.Errorf("extra listen %s: %w", a, err)
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.gs.Serve(s.rpc.Listener(ln)); err != nil {
				s.log.Error("grpc serve", "addr", ln.Addr().String(), "err", err)
			}
		}()
		s.extra = append(s.extra, ln.Addr().String())
		s.log.Info("regroupd also listening", "grpc_addr", ln.Addr().String())
	}
	return nil
}

// registerFairMetrics exports, per read-budget share kind, how many reads
// waited because that share (or, for "global", the whole budget; for
// "shared", the pages subscriptions share) was full.
func (s *server) registerFairMetrics(reg *prometheus.Registry) {
	for _, kind := range []string{"connection", "identity", "address", "anonymous", "shared", "global"} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "regroupd", Name: "read_budget_waits_total",
			Help:        "Reads that waited for read budget, by the share that was full (global: the whole budget).",
			ConstLabels: prometheus.Labels{"share": kind}}, func() float64 { return float64(s.svc.ReadBudgetWaits()[kind]) }))
	}
}
