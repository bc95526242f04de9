// Command regroupd is regroup's delivery service: core/delivery over a
// SQLite file or a PostgreSQL database, served over gRPC
// (adapters/grpctransport), with an HTTP health endpoint, structured logs
// and graceful shutdown on SIGINT or SIGTERM.
//
// Usage:
//
//	regroupd [-listen 127.0.0.1:5050] [-database regroupd.db | -database postgres://…]
//	         [-tls-cert cert.pem -tls-key key.pem] [-rate 1000 -burst 2000] …
//
// With no flag it keeps its envelopes in regroupd.db in the working
// directory and serves gRPC on 127.0.0.1:5050 and /healthz and /metrics on
// 127.0.0.1:5051. Without -tls-cert and -tls-key the gRPC listener is plain
// text, and regroupd logs a warning saying so. Every flag reads its
// default from an environment variable; boolean flags stand alone
// (-postgres-notify) or take =true/=false.
//
// After putting back a backup of the database, run `regroupd restore`
// once (with the same -database) before starting regroupd again.
//
// Run regroupd -h for every flag and its environment variable;
// docs/operations.md is the operator's guide.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "restore" {
		os.Exit(restoreCommand(os.Args[2:], os.Stdout, os.Stderr))
	}
	cfg, err := parseConfig(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "regroupd:", err)
		os.Exit(2)
	}
	if cfg.Version {
		printVersion()
		return
	}
	log := newLogger(cfg)
	if err := prepareDefaultDatabase(cfg, log); err != nil {
		log.Error("start failed", "err", err)
		os.Exit(1)
	}
	if err := checkConfig(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "regroupd:", strings.ReplaceAll(err.Error(), "\n", "\nregroupd: "))
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	srv, err := start(ctx, cfg, log)
	if err != nil {
		log.Error("start failed", "err", err)
		os.Exit(1)
	}
	<-ctx.Done()
	log.Info("shutting down", "signal", "received")
	srv.stop()
	log.Info("stopped")
}

func newLogger(cfg config) *slog.Logger {
	level, _ := parseLevel(cfg.LogLevel) // checked by checkConfig
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, opts))
}
