package main

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	httppprof "net/http/pprof"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/adapters/deliverydb"
	"github.com/regroup-mls/regroup/adapters/grpctransport"
	"github.com/regroup-mls/regroup/adapters/hpkewrap"
	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/adapters/pqwrap"
	"github.com/regroup-mls/regroup/core/algorithm"
	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/ports"
)

// server is one running regroupd.
type server struct {
	log      *slog.Logger
	store    *deliverydb.Store
	svc      *delivery.Service
	rpc      *grpctransport.Server
	gs       *grpc.Server
	lis      net.Listener
	health   *http.Server
	healthLn net.Listener
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	timeout  time.Duration
	metrics  *metrics
	// healthIdle and extra: see limits.go.
	healthIdle time.Duration
	extra      []string
}

func openStore(ctx context.Context, cfg config, hooks deliverydb.Hooks) (*deliverydb.Store, error) {
	if cfg.postgres() {
		var st *deliverydb.Store
		err := withSchemaLock(ctx, cfg.Database, func() (err error) {
			st, err = deliverydb.OpenPostgres(ctx, cfg.Database, &deliverydb.Options{Schema: cfg.PostgresSchema,
				Notify: cfg.PostgresNotify, Writers: cfg.PostgresWriters, MaxOpenConns: cfg.PostgresConns, Hooks: hooks})
			return err
		})
		return st, err
	}
	var st *deliverydb.Store
	err := withSQLiteLock(ctx, cfg.Database, func() (err error) {
		st, err = deliverydb.OpenSQLite(ctx, cfg.Database, &deliverydb.Options{Hooks: hooks})
		return err
	})
	return st, err
}

// start opens the database, listens, and serves until stop.
func start(ctx context.Context, cfg config, log *slog.Logger) (*server, error) {
	m := newMetrics()
	store, err := openStore(ctx, cfg, m.hooks())
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	s := &server{log: log, store: store, timeout: cfg.ShutdownTimeout, metrics: m}
	var kpv delivery.KeyPackageValidator
	if cfg.CheckKeyPackages {
		if kpv, err = keyPackageAdmission(); err != nil {
			store.Close()
			return nil, err
		}
	}
	var pg ports.PublicGroups
	if cfg.AcceptCommits {
		pg = publicValidator(cfg.PublicCacheBytes)
	}
	s.svc = delivery.New(store, cfg.Fair.delivery(&delivery.Options{
		PublicGroups:        pg,
		TwoPhase:            twoPhase(cfg),
		CatchUpWindow:       cfg.CatchUpWindow,
		KeyPackageValidator: kpv,
		Clock:               clock.System{},
		MaxEnvelopeBytes:    cfg.MaxEnvelopeBytes,
		MaxBatch:            cfg.MaxBatch,
		Retention:           cfg.Retention,
		PollInterval:        cfg.PollInterval,
		MaxPageBytes:        cfg.MaxPageBytes,
		ReadBudgetBytes:     cfg.ReadBudgetBytes,
		MaxCursors:          cfg.MaxCursorsPerSubscription,
		Observer:            m,
	}))
	s.rpc = grpctransport.NewServer(s.svc, cfg.Fair.server(&grpctransport.ServerOptions{
		RatePerSecond: cfg.RatePerSecond, Burst: cfg.Burst,
		IdentityRatePerSecond: cfg.IdentityRate, IdentityBurst: cfg.IdentityBurst,
		GlobalRatePerSecond: cfg.GlobalRate, GlobalBurst: cfg.GlobalBurst,
		MaxConnections: cfg.MaxConnections, MaxConnectionsPerIdentity: cfg.MaxConnectionsPerIdentity,
		MaxStreamsPerConnection: uint32(cfg.MaxStreamsPerConnection),
		MaxSubscriptions:        cfg.MaxSubscriptions, MaxSubscriptionsPerConnection: cfg.MaxSubscriptionsPerConnection,
		MaxSubscriptionsPerIdentity: cfg.MaxSubscriptionsPerIdentity,
		MaxCursorsPerConnection:     cfg.MaxCursorsPerConnection, MaxCursorsPerIdentity: cfg.MaxCursorsPerIdentity,
		SlowReaderTimeout: cfg.SlowReaderTimeout, MaxConnectionIdle: cfg.MaxConnectionIdle,
		Logger: log, MaxMessageBytes: max(16<<20, cfg.MaxEnvelopeBytes*2),
	}))
	var extra []grpc.ServerOption
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			store.Close()
			return nil, fmt.Errorf("load TLS key pair: %w", err)
		}
		extra = append(extra, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})))
	}
	s.gs = s.rpc.GRPCServer(extra...)
	if s.lis, err = net.Listen("tcp", cfg.Listen); err != nil {
		store.Close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	bg, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		if err := s.gs.Serve(s.rpc.Listener(s.lis)); err != nil {
			log.Error("grpc serve", "err", err)
		}
	}()
	go func() {
		defer s.wg.Done()
		s.svc.RunRetention(bg, cfg.SweepInterval, func(n int64, err error) {
			if err != nil {
				log.Warn("retention sweep failed", "err", err)
			} else if n > 0 {
				log.Info("retention sweep", "deleted", n)
			}
		})
	}()
	s.governMemory(bg, cfg, log)
	if s.svc.TwoPhase() {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.svc.RunAcceptance(bg, func(err error) { log.Warn("deciding pending commits failed", "err", err) })
		}()
	}
	if cfg.postgres() && cfg.PostgresNotify {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.svc.WatchStore(bg); err != nil && bg.Err() == nil {
				log.Error("watching the database for other servers' appends failed", "err", err)
			}
		}()
	}
	if err := s.listenExtra(cfg.Fair.ExtraListen); err != nil {
		s.stop()
		return nil, err
	}
	s.healthIdle = cfg.Fair.HealthIdleTimeout
	if cfg.HealthListen != "" {
		if err := s.startHealth(cfg.HealthListen, cfg.Pprof); err != nil {
			s.stop()
			return nil, err
		}
	}
	db := "sqlite"
	if cfg.postgres() {
		db = "postgres"
	}
	attrs := []any{"grpc_addr", s.lis.Addr().String(), "database", db, "tls", cfg.TLSCert != ""}
	if s.healthLn != nil {
		attrs = append(attrs, "health_addr", s.healthLn.Addr().String())
	}
	log.Info("regroupd listening", attrs...)
	log.Info("limits in effect", limitsInEffect(cfg)...)
	if cfg.TLSCert == "" {
		log.Warn("gRPC listener is plain text: clients' traffic and installation keys' signatures travel unencrypted; set -tls-cert and -tls-key unless the network is private",
			"grpc_addr", s.lis.Addr().String())
	}
	return s, nil
}

// startHealth serves GET /healthz (200 "ok" when the database answers)
// and GET /metrics (Prometheus text format, see metrics.go), and with
// pprof the Go profiles under /debug/pprof/.
func (s *server) startHealth(addr string, pprof bool) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("health listen: %w", err)
	}
	probe := append([]byte{byte(ports.TopicCommitLog)}, make([]byte, 32)...)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if _, err := s.store.Highest(ctx, probe); err != nil {
			// The driver's text names the database's user, host and
			// port: it goes to the log only (COMP-147).
			s.log.Warn("health check: database unavailable", "err", err)
			http.Error(w, "database unavailable", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", s.metricsHandler())
	if pprof {
		mux.HandleFunc("/debug/pprof/", httppprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", httppprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", httppprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", httppprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", httppprof.Trace)
	}
	s.health = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: s.healthIdle}
	s.healthLn = ln
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.health.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("health serve", "err", err)
		}
	}()
	return nil
}

// stop ends subscriptions, lets calls in flight finish (up to the shutdown
// timeout), and closes the database.
func (s *server) stop() {
	s.rpc.Shutdown()
	done := make(chan struct{})
	go func() { s.gs.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.timeout):
		s.log.Warn("graceful stop timed out; closing connections")
		s.gs.Stop()
	}
	if s.health != nil {
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		_ = s.health.Shutdown(ctx)
		cancel()
	}
	s.cancel()
	s.wg.Wait()
	if err := s.store.Close(); err != nil {
		s.log.Warn("close database", "err", err)
	}
}

// keyPackageAdmission validates key packages with the built-in MLS engine
// and checks their wrapper keys with the built-in wrapper algorithms.
func keyPackageAdmission() (*delivery.KeyPackageAdmission, error) {
	// The engine signs nothing here; it needs a key of its own to exist.
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, err
	}
	engine, err := mls.New(mls.Options{SignaturePrivateKey: priv.Seed()})
	if err != nil {
		return nil, fmt.Errorf("key-package validation engine: %w", err)
	}
	reg, err := algorithm.New(hpkewrap.NewCurve25519(), pqwrap.NewXWing())
	if err != nil {
		return nil, fmt.Errorf("wrapper registry: %w", err)
	}
	return &delivery.KeyPackageAdmission{Parser: engine, Wrappers: reg}, nil
}
