package grpctransport

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/adapters/deliverydb"
	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/transporttest"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/deliverypb"
)

// authedClient dials addr and proves a fresh installation key on the
// connection.
func authedClient(t *testing.T, ctx context.Context, addr string) deliverypb.DeliveryClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	api := deliverypb.NewDeliveryClient(cc)
	_, key, _ := ed25519.GenerateKey(nil)
	ch, err := api.Challenge(ctx, &deliverypb.ChallengeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sig, _ := key.Sign(nil, ch.GetChallenge(), &ed25519.Options{Context: ports.AuthContext})
	if _, err := api.Authenticate(ctx, &deliverypb.AuthenticateRequest{InstallationKey: key.Public().(ed25519.PublicKey), Signature: sig}); err != nil {
		t.Fatal(err)
	}
	return api
}

// COMP-555 to COMP-557: one commit to a topic that many subscription
// streams follow reaches every one of them although its size times the
// streams is several times the read budget: the subscriptions share one
// read of the page and one encoded response, charged to the budget once.
// Each reading its own copy (and the transport holding one more per
// queued response) fills the budget with pages whose responses wait for
// budget only those pages would free, until the connections are shed.
// The service runs on SQLite behind the real server with its listener
// (which counts queued responses, COMP-322).
func TestCOMP555_OneCommitReachesEveryStreamWithinTheReadBudget(t *testing.T) {
	const (
		conns   = 8
		perConn = 32
		size    = 256 << 10
		budget  = 4 << 20 // streams × size is 64 MiB
	)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	store, err := deliverydb.OpenSQLite(ctx, filepath.Join(t.TempDir(), "delivery.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	svc := delivery.New(store, &delivery.Options{Clock: clock.System{},
		MaxEnvelopeBytes: 2 * size, MaxPageBytes: 2 * size, ReadBudgetBytes: budget})
	srv := NewServer(svc, &ServerOptions{
		RatePerSecond: -1, IdentityRatePerSecond: -1, GlobalRatePerSecond: -1, AddressRatePerSecond: -1,
		MaxSubscriptionsPerAddress: -1, MaxCursorsPerAddress: -1, MaxConnectionsPerAddress: -1,
		ResponseProgressTimeout: 10 * time.Second,
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := srv.GRPCServer()
	go gs.Serve(srv.Listener(lis))
	t.Cleanup(func() { srv.Shutdown(); gs.Stop() })
	addr := lis.Addr().String()

	topic := transporttest.RandomGroupTopic()
	pub := authedClient(t, ctx, addr)
	payload := bytes.Repeat([]byte{7}, size)
	var got atomic.Int64
	all := make(chan struct{})
	broken := make(chan error, conns*perConn)
	for c := 0; c < conns; c++ {
		api := authedClient(t, ctx, addr)
		for k := 0; k < perConn; k++ {
			st, err := api.Subscribe(ctx, &deliverypb.SubscribeRequest{Cursors: []*deliverypb.TopicCursor{{Topic: topic}}})
			if err != nil {
				t.Fatal(err)
			}
			if md, err := st.Header(); err != nil || len(md.Get(subscribedHeader)) == 0 {
				t.Fatalf("subscription %d/%d not accepted: %v", c, k, err)
			}
			go func() {
				for {
					resp, err := st.Recv()
					if err != nil {
						if ctx.Err() == nil {
							broken <- fmt.Errorf("stream ended: %w", err)
						}
						return
					}
					for _, e := range resp.GetEnvelopes() {
						if !bytes.Equal(e.GetEnvelope().GetGroupMessage(), payload) {
							broken <- fmt.Errorf("stream got a %d-byte payload, want the published one", len(e.GetEnvelope().GetGroupMessage()))
							return
						}
						if got.Add(1) == conns*perConn {
							close(all)
						}
					}
				}
			}()
		}
	}
	// The read budget in use, sampled while the fan-out runs: a sample
	// can miss the peak, never exceed it.
	var peak atomic.Int64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if n := svc.ReadBudgetInUse(); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-all:
				return
			case <-ctx.Done():
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	if _, err := pub.Publish(ctx, &deliverypb.PublishRequest{Envelopes: []*backendpb.ClientEnvelope{
		transporttest.GroupMessage(topic, payload)}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-all:
	case err := <-broken:
		t.Fatalf("%v (after %d of %d deliveries; read budget in use %d of %d)", err, got.Load(), conns*perConn, svc.ReadBudgetInUse(), budget)
	case <-ctx.Done():
		t.Fatalf("%d of %d streams received the commit (read budget in use %d of %d)", got.Load(), conns*perConn, svc.ReadBudgetInUse(), budget)
	}
	<-sampled
	// COMP-556, COMP-557: the page and its encoded response, once, and
	// the grant of the read after it (a page is read under a grant of
	// the largest page, MaxPageBytes).
	if p := peak.Load(); p > 4*size+64<<10 {
		t.Fatalf("read budget in use peaked at %d bytes for one %d-byte envelope", p, size)
	}
	if n := srv.Stats().Refused[LimitQueuedBytes]; n != 0 {
		t.Fatalf("%d connections shed during the fan-out", n)
	}
	// Every page and shared response is given back once written.
	deadline := time.Now().Add(30 * time.Second)
	for svc.ReadBudgetInUse() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("read budget in use %d after every stream received the commit", svc.ReadBudgetInUse())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// COMP-558: a delivery of a message shared by several streams costs 1
// token per envelope and 1 per started 256 KiB; one sent to one stream
// costs 1 per started 64 KiB (COMP-146).
func TestCOMP558_SharedDeliveryCost(t *testing.T) {
	for _, c := range []struct{ bytes, own, shared int }{
		{100, 2, 2}, {64 << 10, 2, 2}, {320 << 10, 6, 3}, {1 << 20, 17, 5},
	} {
		if got := cost(1, c.bytes); got != c.own {
			t.Errorf("cost of one %d-byte envelope = %d, want %d", c.bytes, got, c.own)
		}
		if got := sharedCost(1, c.bytes); got != c.shared {
			t.Errorf("shared cost of one %d-byte envelope = %d, want %d", c.bytes, got, c.shared)
		}
	}
}
