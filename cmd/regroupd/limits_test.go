package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/adapters/grpctransport"
	"github.com/regroup-mls/regroup/adapters/memtransport"
	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/transporttest"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

var databases = []string{"sqlite", "postgres"}

// startWith starts regroupd on db with cfg changed by change.
func startWith(t *testing.T, db string, change func(*config)) (*server, config) {
	t.Helper()
	cfg := testConfig(t, db)
	if change != nil {
		change(&cfg)
	}
	srv, err := start(context.Background(), cfg, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.stop)
	cfg.Listen = srv.lis.Addr().String()
	return srv, cfg
}

func dialKey(t *testing.T, addr string, key ed25519.PrivateKey) *grpctransport.Client {
	t.Helper()
	c, err := grpctransport.Dial(addr, &grpctransport.ClientOptions{InstallationKey: key, ResubscribeBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newKey() ed25519.PrivateKey {
	_, k, _ := ed25519.GenerateKey(nil)
	return k
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// COMP-145 (finding 9): subscriptions are capped per connection, per
// installation key over all its connections, and for the whole server;
// connections per installation key and in total. Each refusal is
// ErrRateLimited naming its limit, and is counted.
func TestCOMP145_PerConnectionIdentityAndGlobalCaps(t *testing.T) {
	t.Parallel()
	for _, db := range databases {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			srv, cfg := startWith(t, db, func(c *config) {
				c.MaxSubscriptionsPerConnection, c.MaxSubscriptionsPerIdentity, c.MaxSubscriptions = 2, 3, 5
				c.MaxCursorsPerConnection, c.MaxCursorsPerIdentity = 64, 96
				c.MaxConnectionsPerIdentity, c.MaxConnections = 2, 5
			})
			ctx := testCtx(t)
			topics := func(n int) []ports.TopicCursor {
				var cs []ports.TopicCursor
				for i := 0; i < n; i++ {
					cs = append(cs, ports.TopicCursor{Topic: transporttest.RandomGroupTopic()})
				}
				return cs
			}
			expect := func(c *grpctransport.Client, n int, limit string) {
				t.Helper()
				sub, err := c.Subscribe(ctx, topics(n))
				if limit == "" {
					if err != nil {
						t.Fatalf("Subscribe: %v", err)
					}
					t.Cleanup(func() { sub.Close() })
					return
				}
				if !errors.Is(err, ports.ErrRateLimited) || !bytes.Contains([]byte(err.Error()), []byte(limit)) {
					t.Fatalf("Subscribe = %v, want ErrRateLimited naming %s", err, limit)
				}
			}
			k := newKey()
			a, b := dialKey(t, cfg.Listen, k), dialKey(t, cfg.Listen, k)
			expect(a, 1, "")
			expect(a, 1, "")
			expect(a, 1, grpctransport.LimitSubscriptionsPerConn)
			expect(b, 70, grpctransport.LimitCursorsPerConn)
			expect(b, 1, "")
			expect(b, 1, grpctransport.LimitSubscriptionsPerIdentity)
			// A third connection of the same key is refused at authentication.
			if _, err := dialKey(t, cfg.Listen, k).Publish(ctx, transporttestBatch(transporttest.RandomGroupTopic())); !errors.Is(err, ports.ErrRateLimited) {
				t.Fatalf("third connection of one key: %v, want ErrRateLimited", err)
			}
			other := dialKey(t, cfg.Listen, newKey())
			expect(other, 1, "")
			expect(other, 1, "")
			expect(other, 1, grpctransport.LimitSubscriptions)
			// Five connections are open (a, b, the refused one, other, and
			// this one); the sixth is closed at once.
			dialKey(t, cfg.Listen, newKey()).HighestSequenceID(ctx, transporttest.RandomGroupTopic())
			short, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			if _, err := dialKey(t, cfg.Listen, newKey()).HighestSequenceID(short, transporttest.RandomGroupTopic()); err == nil {
				t.Fatal("a connection beyond MaxConnections was served")
			}
			st := srv.rpc.Stats()
			for _, l := range []string{grpctransport.LimitSubscriptionsPerConn, grpctransport.LimitSubscriptionsPerIdentity,
				grpctransport.LimitSubscriptions, grpctransport.LimitCursorsPerConn, grpctransport.LimitConnectionsPerIdentity, grpctransport.LimitConnections} {
				if st.Refused[l] == 0 {
					t.Errorf("refusals by %s were not counted: %v", l, st.Refused)
				}
			}
		})
	}
}

// COMP-146 (findings 4 and 9): the rate limiter charges by cost: a
// publish of many envelopes costs one token per envelope and per started
// 64 KiB, so one call cannot buy a large batch for one token; the
// bucket of an installation key is shared by all its connections.
func TestCOMP146_RateChargedByCost(t *testing.T) {
	t.Parallel()
	for _, db := range databases {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			_, cfg := startWith(t, db, func(c *config) {
				c.RatePerSecond, c.Burst = 1, 40
				c.IdentityRate, c.IdentityBurst = 1, 60
			})
			ctx := testCtx(t)
			topic := transporttest.RandomGroupTopic()
			batch := func(n int) []*backendpb.ClientEnvelope {
				var envs []*backendpb.ClientEnvelope
				for i := 0; i < n; i++ {
					envs = append(envs, transporttest.GroupMessage(topic, []byte{byte(i)}))
				}
				return envs
			}
			k := newKey()
			a := dialKey(t, cfg.Listen, k)
			if _, err := a.Publish(ctx, batch(50)); !errors.Is(err, ports.ErrRateLimited) {
				t.Fatalf("a 50-envelope publish on a 40-token connection = %v, want ErrRateLimited", err)
			}
			if _, err := a.Publish(ctx, batch(30)); err != nil {
				t.Fatalf("a 30-envelope publish: %v", err)
			}
			// Another connection of the same key has a full connection
			// bucket but shares the key's, now nearly spent.
			b := dialKey(t, cfg.Listen, k)
			if _, err := b.Publish(ctx, batch(30)); !errors.Is(err, ports.ErrRateLimited) || !bytes.Contains([]byte(err.Error()), []byte(grpctransport.LimitRateIdentity)) {
				t.Fatalf("second connection of the key = %v, want the identity rate limit", err)
			}
			if _, err := dialKey(t, cfg.Listen, newKey()).Publish(ctx, batch(30)); err != nil {
				t.Fatalf("another key: %v", err)
			}
		})
	}
}

// COMP-145 (finding 1): a subscriber that stops taking envelopes has its
// connection closed after the slow-reader timeout, so nothing stays
// queued for it; its client resubscribes from its cursor and, once it
// reads again, gets every envelope exactly once, in order.
func TestCOMP145_SlowReaderShedAndResumes(t *testing.T) {
	t.Parallel()
	for _, db := range databases {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			srv, cfg := startWith(t, db, func(c *config) {
				c.SlowReaderTimeout = 500 * time.Millisecond
				c.RatePerSecond, c.IdentityRate, c.GlobalRate = -1, -1, -1
			})
			ctx := testCtx(t)
			topic := transporttest.RandomGroupTopic()
			pub := dialKey(t, cfg.Listen, newKey())
			var want []uint64
			for i := 0; i < 12; i++ {
				var envs []*backendpb.ClientEnvelope
				for j := 0; j < 20; j++ {
					envs = append(envs, transporttest.GroupMessage(topic, bytes.Repeat([]byte{byte(j)}, 60<<10)))
				}
				ids, err := pub.Publish(ctx, envs)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, ids...)
			}
			reader := dialKey(t, cfg.Listen, newKey())
			sub, err := reader.Subscribe(ctx, []ports.TopicCursor{{Topic: topic}})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			deadline := time.Now().Add(30 * time.Second)
			for srv.rpc.Stats().SlowReadersShed == 0 {
				if time.Now().After(deadline) {
					t.Fatal("a subscriber that read nothing for 30s was not shed")
				}
				time.Sleep(50 * time.Millisecond)
			}
			for i, id := range want {
				e, err := sub.Next(ctx)
				if err != nil {
					t.Fatalf("Next after the shed: %v", err)
				}
				if e.GetSequenceId() != id {
					t.Fatalf("envelope %d: id %d, want %d (lost or repeated across the shed)", i, e.GetSequenceId(), id)
				}
			}
		})
	}
}

// failingAppend stores the batch and then reports a failure, as a
// publisher whose connection or ctx ends during the commit sees it.
type failingAppend struct{ ports.EnvelopeStore }

func (f failingAppend) Append(ctx context.Context, envs []ports.NewStoredEnvelope) ([]uint64, error) {
	if _, err := f.EnvelopeStore.Append(ctx, envs); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("append: %w: connection lost during commit", ports.ErrUnavailable)
}

// COMP-142 (finding 3) on both databases: a publish whose Append failed
// after its commit still wakes the subscribers (polling is off), so they
// catch up without another publish.
func TestCOMP142_SubscriberWokenAfterFailedAppend(t *testing.T) {
	t.Parallel()
	for _, db := range databases {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			store, _ := openTestStore(t, db)
			t.Cleanup(func() { store.Close() })
			svc := delivery.New(failingAppend{store}, &delivery.Options{Clock: clock.System{}})
			tr := memtransport.New(svc, nil)
			ctx := testCtx(t)
			topic := transporttest.RandomGroupTopic()
			sub, err := tr.Subscribe(ctx, []ports.TopicCursor{{Topic: topic}})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			// The subscription reads its (empty) backlog and waits.
			idle, stop := context.WithTimeout(ctx, 200*time.Millisecond)
			defer stop()
			if _, err := sub.Next(idle); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Next on an empty topic = %v", err)
			}
			if _, err := tr.Publish(ctx, []*backendpb.ClientEnvelope{transporttest.GroupMessage(topic, []byte("x"))}); err == nil {
				t.Fatal("publish reported success")
			}
			wait, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			if e, err := sub.Next(wait); err != nil || string(e.GetEnvelope().GetGroupMessage()) != "x" {
				t.Fatalf("subscriber after a committed but failed publish: %v, %v", e, err)
			}
		})
	}
}
