package grpctransport

import (
	"context"
	"crypto/ed25519"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// countingService is a fakeService that counts the publishes and reads it
// serves, so a test can see which replica a call reached.
type countingService struct {
	fakeService
	publishes, reads atomic.Int64
}

func (c *countingService) Publish(ctx context.Context, caller ports.Caller, envs []*backendpb.ClientEnvelope) ([]uint64, error) {
	c.publishes.Add(1)
	return c.fakeService.Publish(ctx, caller, envs)
}

func (c *countingService) HighestSequenceID(ctx context.Context, caller ports.Caller, topic []byte) (uint64, error) {
	c.reads.Add(1)
	return c.fakeService.HighestSequenceID(ctx, caller, topic)
}

// replica is one server of a replica test that the test can stop.
type replica struct {
	svc  *countingService
	addr string
	stop func()
}

func startReplica(t *testing.T) *replica {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	svc := &countingService{}
	srv := NewServer(svc, nil)
	gs := srv.GRPCServer()
	go gs.Serve(lis)
	r := &replica{svc: svc, addr: lis.Addr().String(), stop: func() { srv.Shutdown(); gs.Stop() }}
	t.Cleanup(r.stop)
	return r
}

// DialReplicas spreads calls over every replica, and once one goes away
// the others take every call: reads never fail, and publishes fail only
// while the client has not yet seen the replica go (their outcome is
// unknown, so they are never retried elsewhere).
func TestDialReplicas_SpreadsAndFailsOver(t *testing.T) {
	c := ctx(t)
	reps := []*replica{startReplica(t), startReplica(t), startReplica(t)}
	_, key, _ := ed25519.GenerateKey(nil)
	cl, err := DialReplicas([]string{reps[0].addr, reps[1].addr, reps[2].addr}, &ClientOptions{InstallationKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	env := &backendpb.ClientEnvelope{TargetTopic: append([]byte{0}, make([]byte, 32)...),
		Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: []byte{1}}}
	// Let every connection come up, then publish: each replica serves some.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := cl.Publish(c, []*backendpb.ClientEnvelope{env}); err != nil {
			t.Fatalf("publish with every replica up: %v", err)
		}
		if reps[0].svc.publishes.Load() > 0 && reps[1].svc.publishes.Load() > 0 && reps[2].svc.publishes.Load() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("publishes per replica %d, %d, %d: the client does not spread them",
				reps[0].svc.publishes.Load(), reps[1].svc.publishes.Load(), reps[2].svc.publishes.Load())
		}
	}
	reps[1].stop()
	for i := range 30 {
		if _, err := cl.HighestSequenceID(c, env.GetTargetTopic()); err != nil {
			t.Fatalf("read %d after one replica stopped: %v (reads must fail over)", i, err)
		}
	}
	before := [3]int64{reps[0].svc.publishes.Load(), reps[1].svc.publishes.Load(), reps[2].svc.publishes.Load()}
	failed := 0
	for range 30 {
		if _, err := cl.Publish(c, []*backendpb.ClientEnvelope{env}); err != nil {
			if !errors.Is(err, ports.ErrUnavailable) {
				t.Fatalf("publish to a stopped replica = %v, want ErrUnavailable", err)
			}
			failed++
		}
	}
	if got := reps[1].svc.publishes.Load(); got != before[1] {
		t.Fatalf("the stopped replica served %d publishes", got-before[1])
	}
	if failed > 1 {
		t.Fatalf("%d of 30 publishes failed after one replica stopped; only a call in flight to it may", failed)
	}
	if reps[0].svc.publishes.Load() == before[0] || reps[2].svc.publishes.Load() == before[2] {
		t.Fatalf("the remaining replicas did not share the publishes: %v then %d, %d", before,
			reps[0].svc.publishes.Load(), reps[2].svc.publishes.Load())
	}
}

// DialReplicas refuses an empty list of targets.
func TestDialReplicas_NoTarget(t *testing.T) {
	if _, err := DialReplicas(nil, nil); !errors.Is(err, ports.ErrInvalidArgument) {
		t.Fatalf("DialReplicas(nil) = %v, want ErrInvalidArgument", err)
	}
}
