package main

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// TestBooleanFlagsStandAlone: a bare boolean flag means true and leaves
// the next flag alone; =false turns a default off; a value that is not a
// boolean is refused.
func TestBooleanFlagsStandAlone(t *testing.T) {
	cfg, err := parseConfig([]string{"-postgres-notify", "-rate", "5", "-pprof", "-check-key-packages=false"})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.PostgresNotify || !cfg.Pprof || cfg.CheckKeyPackages || cfg.RatePerSecond != 5 {
		t.Fatalf("notify %v pprof %v check %v rate %v; want true true false 5", cfg.PostgresNotify, cfg.Pprof, cfg.CheckKeyPackages, cfg.RatePerSecond)
	}
	t.Setenv("REGROUPD_POSTGRES_NOTIFY", "true")
	if cfg, err := parseConfig(nil); err != nil || !cfg.PostgresNotify {
		t.Fatalf("REGROUPD_POSTGRES_NOTIFY=true: notify %v, %v", cfg.PostgresNotify, err)
	}
	if _, err := parseConfig([]string{"-postgres-notify=maybe"}); err == nil {
		t.Error("-postgres-notify=maybe accepted")
	}
	t.Setenv("REGROUPD_PPROF", "yes please")
	if _, err := parseConfig(nil); err == nil {
		t.Error("REGROUPD_PPROF=yes please accepted")
	}
}

// logBuffer is an io.Writer slog may call from several goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPlainTextListeningIsLogged: without TLS, start warns that the
// listener is plain text; with TLS it does not.
func TestPlainTextListeningIsLogged(t *testing.T) {
	certFile, keyFile, _ := selfSigned(t, t.TempDir())
	for _, tls := range []bool{false, true} {
		cfg := testConfig(t, "sqlite")
		if tls {
			cfg.TLSCert, cfg.TLSKey = certFile, keyFile
		}
		var out logBuffer
		srv, err := start(context.Background(), cfg, slog.New(slog.NewTextHandler(&out, nil)))
		if err != nil {
			t.Fatal(err)
		}
		srv.stop()
		warned := strings.Contains(out.String(), "level=WARN msg=\"gRPC listener is plain text")
		if warned == tls {
			t.Errorf("tls %v: plain-text warning logged %v:\n%s", tls, warned, out.String())
		}
	}
}
