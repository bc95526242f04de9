package main

import (
	"context"
	"crypto/ed25519"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/deliverydb"
	"github.com/regroup-mls/regroup/adapters/grpctransport"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/transporttest"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// testConfig returns a regroupd configuration on 127.0.0.1:0 over a fresh
// database: a SQLite file, or a fresh PostgreSQL schema dropped after the
// test (skipped without REGROUP_POSTGRES_DSN, failed when CI=true).
func testConfig(t *testing.T, db string) config {
	t.Helper()
	cfg, err := parseConfig([]string{"-listen", "127.0.0.1:0", "-health-listen", "", "-max-envelope-bytes", "65536", "-shutdown-timeout", "2s"})
	if err != nil {
		t.Fatal(err)
	}
	switch db {
	case "sqlite":
		cfg.Database = filepath.Join(t.TempDir(), "regroupd.db")
	default:
		dsn := os.Getenv("REGROUP_POSTGRES_DSN")
		if dsn == "" {
			if os.Getenv("CI") == "true" {
				t.Fatal("REGROUP_POSTGRES_DSN is unset and CI=true: the PostgreSQL suite must run in CI")
			}
			t.Skip("REGROUP_POSTGRES_DSN unset: set it to a PostgreSQL DSN to run the suite on PostgreSQL")
		}
		cfg.Database, cfg.PostgresSchema = dsn, deliverydb.FreshSchemaName()
		t.Cleanup(func() {
			if s, err := deliverydb.OpenPostgres(context.Background(), dsn, &deliverydb.Options{Schema: cfg.PostgresSchema}); err == nil {
				s.DropSchema(context.Background())
				s.Close()
			}
		})
	}
	return cfg
}

type grpcHarness struct {
	cfg config
	srv *server
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newGRPCHarness(t *testing.T, db string) *grpcHarness {
	h := &grpcHarness{cfg: testConfig(t, db)}
	// The suite checks the transport's contract; the limits have their
	// own tests (limits_test.go). With the default per-connection rate, a
	// reader that re-reads a topic cannot keep up with four publishers on
	// a fast machine and the suite's reader case never ends.
	h.cfg.RatePerSecond, h.cfg.IdentityRate, h.cfg.GlobalRate = -1, -1, -1
	srv, err := start(context.Background(), h.cfg, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	h.cfg.Listen = srv.lis.Addr().String() // a restart comes back on the same port
	t.Cleanup(func() { h.srv.stop() })
	return h
}

func (h *grpcHarness) Caps() transporttest.Caps {
	return transporttest.Caps{MaxEnvelopeBytes: h.cfg.MaxEnvelopeBytes, Bounce: true}
}

func (h *grpcHarness) dial(t *testing.T, key ed25519.PrivateKey) ports.Transport {
	c, err := grpctransport.Dial(h.cfg.Listen, &grpctransport.ClientOptions{InstallationKey: key, ResubscribeBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (h *grpcHarness) NewTransport(t *testing.T) ports.Transport {
	_, key, _ := ed25519.GenerateKey(nil)
	return h.dial(t, key)
}

func (h *grpcHarness) NewAnonymousTransport(t *testing.T) ports.Transport { return h.dial(t, nil) }

// Bounce stops regroupd (ending every connection and stream) and starts it
// again on the same address and database.
func (h *grpcHarness) Bounce(t *testing.T) {
	h.srv.stop()
	var err error
	for i := 0; i < 400; i++ {
		if h.srv, err = start(context.Background(), h.cfg, quietLog()); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("restart regroupd: %v", err)
}

func TestGRPCTransport(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			// One regroupd per database serves every case (each case uses
			// fresh topics); the restart case restarts it for the rest.
			h := newGRPCHarness(t, db)
			transporttest.Run(t, func(*testing.T) transporttest.Harness { return h })
		})
	}
}

func transporttestBatch(topic []byte) []*backendpb.ClientEnvelope {
	return []*backendpb.ClientEnvelope{transporttest.GroupMessage(topic, []byte("one")), transporttest.GroupMessage(topic, []byte("two"))}
}

// Two regroupd sharing one PostgreSQL schema with -postgres-notify: a
// subscriber on one receives, in order and at once (no polling), what is
// published through the other.
func TestTwoServersSharePostgres(t *testing.T) {
	t.Parallel()
	cfgA := testConfig(t, "postgres")
	cfgA.PostgresNotify = true
	cfgB := cfgA
	a, err := start(context.Background(), cfgA, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer a.stop()
	b, err := start(context.Background(), cfgB, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer b.stop()
	ha, hb := &grpcHarness{cfg: cfgA}, &grpcHarness{cfg: cfgB}
	ha.cfg.Listen, hb.cfg.Listen = a.lis.Addr().String(), b.lis.Addr().String()
	pub, sub := ha.NewTransport(t), hb.NewTransport(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	topic := transporttest.RandomGroupTopic()
	s, err := sub.Subscribe(ctx, []ports.TopicCursor{{Topic: topic}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The watch on b may still be connecting: keep publishing until the
	// first envelope arrives, then check the rest follow in order.
	got := make(chan *backendpb.OriginatorEnvelope, 100)
	go func() {
		for {
			e, err := s.Next(ctx)
			if err != nil {
				return
			}
			got <- e
		}
	}()
	var published []uint64
	for k := 0; k < 5; {
		if len(published) < 5 {
			ids, err := pub.Publish(ctx, []*backendpb.ClientEnvelope{transporttest.GroupMessage(topic, []byte("x"))})
			if err != nil {
				t.Fatal(err)
			}
			published = append(published, ids[0])
		}
		// Until all five are out, publish again when nothing arrives for a
		// moment; then only a report from the other server can deliver.
		wait := time.After(300 * time.Millisecond)
		if len(published) == 5 {
			wait = nil
		}
		select {
		case e := <-got:
			if e.GetSequenceId() != published[k] {
				t.Fatalf("subscriber on the other server got id %d, want the acknowledged %d", e.GetSequenceId(), published[k])
			}
			k++
		case <-wait:
		case <-ctx.Done():
			t.Fatalf("subscriber on the other server stopped after %d of 5", k)
		}
	}
}
