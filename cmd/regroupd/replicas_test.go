package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/deliverydb"
	"github.com/regroup-mls/regroup/adapters/grpctransport"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/transporttest"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// COMP-149: three regroupd processes share one PostgreSQL schema with
// -postgres-notify. A publisher spreads over all three; a subscriber on
// each process receives every stored envelope of each topic, in order and
// once, whichever process took the publish — also across a SIGKILL and
// restart of one of them, whose subscriber resumes from its cursor.
func TestCOMP149_ReplicasWakeEachOther(t *testing.T) {
	t.Parallel()
	dsn := os.Getenv("REGROUP_POSTGRES_DSN")
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("REGROUP_POSTGRES_DSN is unset and CI=true: the replica test must run in CI")
		}
		t.Skip("REGROUP_POSTGRES_DSN unset: set it to a PostgreSQL DSN to run replicas")
	}
	schema := deliverydb.FreshSchemaName()
	t.Cleanup(func() {
		if s, err := deliverydb.OpenPostgres(context.Background(), dsn, &deliverydb.Options{Schema: schema}); err == nil {
			s.DropSchema(context.Background())
			s.Close()
		}
	})
	bin := buildDaemon(t)
	args := func(listen string) []string {
		return []string{"-listen", listen, "-health-listen", "", "-database", dsn, "-postgres-schema", schema,
			"-postgres-notify", "-rate", "-1", "-identity-rate", "-1", "-global-rate", "-1"}
	}
	ds := []*daemon{startDaemon(t, bin, args("127.0.0.1:0")...)}
	// The first one migrated the schema; the others start on it.
	ds = append(ds, startDaemon(t, bin, args("127.0.0.1:0")...), startDaemon(t, bin, args("127.0.0.1:0")...))
	addrs := []string{ds[0].grpcAddr, ds[1].grpcAddr, ds[2].grpcAddr}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	topics := [][]byte{transporttest.RandomGroupTopic(), transporttest.RandomGroupTopic()}
	cursors := []ports.TopicCursor{{Topic: topics[0]}, {Topic: topics[1]}}

	type reader struct {
		mu  sync.Mutex
		ids map[string][]uint64
	}
	readers := make([]*reader, len(addrs))
	for i, addr := range addrs {
		_, key, _ := ed25519.GenerateKey(nil)
		c, err := grpctransport.Dial(addr, &grpctransport.ClientOptions{InstallationKey: key, ResubscribeBackoff: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		sub, err := c.Subscribe(ctx, cursors)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		r := &reader{ids: map[string][]uint64{}}
		readers[i] = r
		go func() {
			for {
				e, err := sub.Next(ctx)
				if err != nil {
					return
				}
				r.mu.Lock()
				tp := string(e.GetEnvelope().GetTargetTopic())
				r.ids[tp] = append(r.ids[tp], e.GetSequenceId())
				r.mu.Unlock()
			}
		}()
	}

	_, key, _ := ed25519.GenerateKey(nil)
	pub, err := grpctransport.DialReplicas(addrs, &grpctransport.ClientOptions{InstallationKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	publish := func(n int) {
		for i := 0; i < n; {
			env := transporttest.GroupMessage(topics[i%2], []byte(fmt.Sprint(i)))
			if _, err := pub.Publish(ctx, []*backendpb.ClientEnvelope{env}); err != nil {
				if errors.Is(err, ports.ErrUnavailable) && ctx.Err() == nil {
					continue // outcome unknown: publish again
				}
				t.Fatalf("publish %d: %v", i, err)
			}
			i++
		}
	}
	publish(40)
	ds[2].cmd.Process.Signal(syscall.SIGKILL)
	<-ds[2].exited
	publish(20)
	ds[2] = startDaemon(t, bin, args(addrs[2])...)
	publish(40)

	q, _ := grpctransport.Dial(addrs[0], &grpctransport.ClientOptions{InstallationKey: key})
	defer q.Close()
	want := map[string][]uint64{}
	for _, tp := range topics {
		page, err := q.Query(ctx, tp, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			want[string(tp)] = append(want[string(tp)], e.GetSequenceId())
		}
	}
	if n := len(want[string(topics[0])]) + len(want[string(topics[1])]); n < 100 {
		t.Fatalf("the topics hold %d envelopes, want at least the 100 acknowledged", n)
	}
	for i, r := range readers {
		deadline := time.Now().Add(30 * time.Second)
		for {
			r.mu.Lock()
			got := fmt.Sprint(r.ids[string(topics[0])], r.ids[string(topics[1])])
			r.mu.Unlock()
			if got == fmt.Sprint(want[string(topics[0])], want[string(topics[1])]) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("subscriber on replica %d delivered %s,\nthe topics hold %v %v", i, got, want[string(topics[0])], want[string(topics[1])])
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
