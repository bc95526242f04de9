package memtransport

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// recorder is a test double of ports.DeliveryService that keeps what it
// was given; the real service runs under this transport in the transport
// suite (cmd/regroupd).
type recorder struct {
	caller ports.Caller
	got    []*backendpb.ClientEnvelope
}

func (r *recorder) Publish(_ context.Context, c ports.Caller, envs []*backendpb.ClientEnvelope) ([]uint64, error) {
	r.caller, r.got = c, envs
	return make([]uint64, len(envs)), nil
}
func (r *recorder) Query(context.Context, ports.Caller, []byte, uint64, int) ([]*backendpb.OriginatorEnvelope, error) {
	return nil, nil
}
func (r *recorder) QueryNewest(context.Context, ports.Caller, []byte) (*backendpb.OriginatorEnvelope, error) {
	return nil, ports.ErrNotFound
}
func (r *recorder) HighestSequenceID(_ context.Context, c ports.Caller, _ []byte) (uint64, error) {
	r.caller = c
	return 0, nil
}
func (r *recorder) Subscribe(context.Context, ports.Caller, []ports.TopicCursor) (ports.Subscription, error) {
	return nil, errors.New("unused")
}
func (r *recorder) Authenticate(context.Context, []byte, []byte, []byte) (ports.Caller, error) {
	return ports.Caller{}, errors.New("unused")
}

// The service gets a copy: changing an envelope after Publish changes
// nothing the service holds.
func TestPublishCopies(t *testing.T) {
	r := &recorder{}
	tr := New(r, &Options{InstallationKey: []byte("k")})
	env := &backendpb.ClientEnvelope{TargetTopic: []byte{0, 1}}
	if _, err := tr.Publish(context.Background(), []*backendpb.ClientEnvelope{env}); err != nil {
		t.Fatal(err)
	}
	env.TargetTopic[1] = 9
	if r.got[0].TargetTopic[1] != 1 {
		t.Fatal("the service saw the caller's later change")
	}
	if string(r.caller.InstallationKey) != "k" {
		t.Fatalf("caller = %q", r.caller.InstallationKey)
	}
}

func TestCallers(t *testing.T) {
	r := &recorder{}
	New(r, &Options{Anonymous: true, InstallationKey: []byte("k")}).HighestSequenceID(context.Background(), nil)
	if r.caller.Authenticated() {
		t.Fatal("Anonymous transport authenticated")
	}
	New(r, nil).HighestSequenceID(context.Background(), nil)
	if len(r.caller.InstallationKey) != 32 {
		t.Fatal("default transport is not a 32-byte installation")
	}
}

func TestExpiredContext(t *testing.T) {
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	_, err := New(&recorder{}, nil).Publish(ctx, nil)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ports.ErrUnavailable) {
		t.Fatalf("Publish with expired ctx = %v", err)
	}
}
