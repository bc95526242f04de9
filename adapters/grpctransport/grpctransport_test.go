package grpctransport

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/deliverypb"
)

// fakeService is a test double of ports.DeliveryService for the
// transport's own rules (error classes, rate limits, challenges); the real
// service is proven by the transport suite in cmd/regroupd.
type fakeService struct {
	err   error
	block bool // HighestSequenceID waits for its ctx to end
}

func (f *fakeService) Publish(ctx context.Context, c ports.Caller, envs []*backendpb.ClientEnvelope) ([]uint64, error) {
	if !c.Authenticated() {
		return nil, fmt.Errorf("%w: anonymous", ports.ErrUnauthenticated)
	}
	return make([]uint64, len(envs)), f.err
}
func (f *fakeService) Query(context.Context, ports.Caller, []byte, uint64, int) ([]*backendpb.OriginatorEnvelope, error) {
	return nil, f.err
}
func (f *fakeService) QueryNewest(context.Context, ports.Caller, []byte) (*backendpb.OriginatorEnvelope, error) {
	return nil, f.err
}
func (f *fakeService) HighestSequenceID(ctx context.Context, _ ports.Caller, _ []byte) (uint64, error) {
	if f.block {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return 7, f.err
}
func (f *fakeService) Subscribe(context.Context, ports.Caller, []ports.TopicCursor) (ports.Subscription, error) {
	return nil, f.err
}
func (f *fakeService) Authenticate(_ context.Context, ch, key, sig []byte) (ports.Caller, error) {
	if len(key) != 32 || ed25519.VerifyWithOptions(key, ch, sig, &ed25519.Options{Context: ports.AuthContext}) != nil {
		return ports.Caller{}, fmt.Errorf("%w: bad signature", ports.ErrUnauthenticated)
	}
	return ports.Caller{InstallationKey: key}, nil
}

func serve(t *testing.T, svc ports.DeliveryService, opts *ServerOptions) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(svc, opts)
	gs := srv.GRPCServer()
	go gs.Serve(lis)
	t.Cleanup(func() { srv.Shutdown(); gs.Stop() })
	return lis.Addr().String()
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// Every ports sentinel survives the wire: ToStatus on the server, then
// FromStatus on the client, keeps the class, and the reason of the classes
// a client causes; an unavailable service's reason stays on the server
// (COMP-147).
func TestErrorClassesRoundTrip(t *testing.T) {
	for _, class := range []error{ports.ErrInvalidArgument, ports.ErrNotFound, ports.ErrUnauthenticated, ports.ErrRateLimited, ports.ErrUnavailable} {
		err := FromStatus(context.Background(), "op", ToStatus(fmt.Errorf("%w: the reason", class)))
		if !errors.Is(err, class) || strings.Contains(err.Error(), "the reason") != (class != ports.ErrUnavailable) {
			t.Errorf("%v came back as %v", class, err)
		}
	}
	if err := FromStatus(context.Background(), "op", ToStatus(errors.New("boom"))); !errors.Is(err, ports.ErrUnavailable) {
		t.Errorf("an unclassified error came back as %v, want ErrUnavailable", err)
	}
	if err := FromStatus(context.Background(), "op", ToStatus(context.DeadlineExceeded)); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ports.ErrUnavailable) {
		t.Errorf("deadline came back as %v", err)
	}
}

// COMP-522: a catch-up refusal of another chain crosses the wire as
// itself, and still as a catch-up refusal; a plain one does not become it.
func TestCOMP522_OtherChainCrossesGRPC(t *testing.T) {
	err := FromStatus(context.Background(), "op", ToStatus(fmt.Errorf("envelope 0: %w: the reason", ports.ErrOtherChain)))
	if !errors.Is(err, ports.ErrOtherChain) || !errors.Is(err, ports.ErrCatchUp) || !strings.Contains(err.Error(), "the reason") {
		t.Errorf("ErrOtherChain came back as %v", err)
	}
	err = FromStatus(context.Background(), "op", ToStatus(fmt.Errorf("envelope 0: %w: the reason", ports.ErrCatchUp)))
	if !errors.Is(err, ports.ErrCatchUp) || errors.Is(err, ports.ErrOtherChain) {
		t.Errorf("ErrCatchUp came back as %v", err)
	}
}

// Over a real connection too, and a refused publish keeps its reason.
func TestErrorClassesOverTheWire(t *testing.T) {
	svc := &fakeService{err: fmt.Errorf("%w: envelope 0: topic kind 0x04 takes a sealed_commit_log_entry payload", ports.ErrInvalidArgument)}
	_, key, _ := ed25519.GenerateKey(nil)
	c, err := Dial(serve(t, svc, nil), &ClientOptions{InstallationKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Publish(ctx(t), []*backendpb.ClientEnvelope{{}})
	if !errors.Is(err, ports.ErrInvalidArgument) || !strings.Contains(err.Error(), "sealed_commit_log_entry") {
		t.Fatalf("Publish = %v", err)
	}
	svc.err = fmt.Errorf("%w: empty", ports.ErrNotFound)
	if _, err := c.QueryNewest(ctx(t), []byte{0}); !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("QueryNewest = %v", err)
	}
}

// Rate limits are per connection: one connection past its burst is
// refused with ErrRateLimited while another connection is not.
func TestRateLimitPerConnection(t *testing.T) {
	addr := serve(t, &fakeService{}, &ServerOptions{RatePerSecond: 0.001, Burst: 3})
	a, _ := Dial(addr, nil)
	b, _ := Dial(addr, nil)
	defer a.Close()
	defer b.Close()
	var limited error
	for i := 0; i < 5 && limited == nil; i++ {
		_, limited = a.HighestSequenceID(ctx(t), []byte{4})
	}
	if !errors.Is(limited, ports.ErrRateLimited) {
		t.Fatalf("connection past its burst: %v, want ErrRateLimited", limited)
	}
	if _, err := b.HighestSequenceID(ctx(t), []byte{4}); err != nil {
		t.Fatalf("another connection was limited too: %v", err)
	}
}

// COMP-081: a connection proves its installation key by signing the
// server's challenge; a challenge is good once, and a signature over
// another challenge or without the context fails.
func TestCOMP081_ChallengeAuthentication(t *testing.T) {
	addr := serve(t, &fakeService{}, nil)
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	api := deliverypb.NewDeliveryClient(cc)
	pub, priv, _ := ed25519.GenerateKey(nil)
	if _, err := api.Authenticate(ctx(t), &deliverypb.AuthenticateRequest{InstallationKey: pub, Signature: make([]byte, 64)}); !errors.Is(FromStatus(context.Background(), "auth", err), ports.ErrUnauthenticated) {
		t.Fatalf("Authenticate without a challenge: %v", err)
	}
	ch, err := api.Challenge(ctx(t), &deliverypb.ChallengeRequest{})
	if err != nil || len(ch.GetChallenge()) != 32 {
		t.Fatalf("Challenge = %v, %v", ch, err)
	}
	plain := ed25519.Sign(priv, ch.GetChallenge())
	if _, err := api.Authenticate(ctx(t), &deliverypb.AuthenticateRequest{InstallationKey: pub, Signature: plain}); err == nil {
		t.Fatal("signature without the auth context accepted")
	}
	ch, _ = api.Challenge(ctx(t), &deliverypb.ChallengeRequest{})
	sig, _ := priv.Sign(nil, ch.GetChallenge(), &ed25519.Options{Context: ports.AuthContext})
	if _, err := api.Authenticate(ctx(t), &deliverypb.AuthenticateRequest{InstallationKey: pub, Signature: sig}); err != nil {
		t.Fatalf("valid signature refused: %v", err)
	}
	if _, err := api.Publish(ctx(t), &deliverypb.PublishRequest{Envelopes: []*backendpb.ClientEnvelope{{}}}); err != nil {
		t.Fatalf("publish on the authenticated connection: %v", err)
	}
	if _, err := api.Authenticate(ctx(t), &deliverypb.AuthenticateRequest{InstallationKey: pub, Signature: sig}); err == nil {
		t.Fatal("a challenge signature was accepted twice")
	}
}

// A client with a key authenticates by itself when the server asks.
func TestClientAuthenticatesOnDemand(t *testing.T) {
	addr := serve(t, &fakeService{}, nil)
	_, key, _ := ed25519.GenerateKey(nil)
	c, _ := Dial(addr, &ClientOptions{InstallationKey: key})
	defer c.Close()
	if _, err := c.Publish(ctx(t), []*backendpb.ClientEnvelope{{}}); err != nil {
		t.Fatalf("Publish with a key: %v", err)
	}
	anon, _ := Dial(addr, nil)
	defer anon.Close()
	if _, err := anon.Publish(ctx(t), []*backendpb.ClientEnvelope{{}}); !errors.Is(err, ports.ErrUnauthenticated) {
		t.Fatalf("anonymous Publish = %v", err)
	}
}

// A call while no server listens fails with ErrUnavailable within its
// deadline.
func TestUnreachableHonoursDeadline(t *testing.T) {
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := lis.Addr().String()
	lis.Close()
	c, _ := Dial(addr, nil)
	defer c.Close()
	cx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.HighestSequenceID(cx, []byte{4})
	if !errors.Is(err, ports.ErrUnavailable) {
		t.Fatalf("call to nowhere = %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("call took %v past a 300ms deadline", d)
	}
}

// A call to a server that does not answer returns when its ctx deadline
// passes, with an error wrapping both ErrUnavailable and DeadlineExceeded.
func TestHangingServerHonoursDeadline(t *testing.T) {
	c, _ := Dial(serve(t, &fakeService{block: true}, nil), nil)
	defer c.Close()
	cx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.HighestSequenceID(cx, []byte{4})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ports.ErrUnavailable) {
		t.Fatalf("call to a hanging server = %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("returned after %v for a 200ms deadline", d)
	}
}
