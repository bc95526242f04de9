package delivery

import (
	"context"
	"crypto/ed25519"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/transporttest"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// FuzzPublish feeds arbitrary wire bytes, decoded as a ClientEnvelope, to
// admission: it never panics, a refusal always wraps ErrInvalidArgument,
// and an admitted envelope reads back byte for byte at the id it got.
func FuzzPublish(f *testing.F) {
	_, priv, _ := ed25519.GenerateKey(nil)
	for _, e := range []*backendpb.ClientEnvelope{
		transporttest.SealedEntry(priv, []byte("123456789012"), []byte("ct")),
		transporttest.GroupMessage(transporttest.RandomGroupTopic(), []byte("m")),
		transporttest.Welcome(make([]byte, 32), []byte("w")),
		keyPackage(make([]byte, 32)),
	} {
		b, _ := proto.Marshal(e)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		env := new(backendpb.ClientEnvelope)
		if proto.Unmarshal(data, env) != nil {
			return
		}
		svc := New(newMemStore(), withClock(&Options{MaxEnvelopeBytes: 4096}))
		ctx := context.Background()
		ids, err := svc.Publish(ctx, authed, []*backendpb.ClientEnvelope{env})
		if err != nil {
			if !errors.Is(err, ports.ErrInvalidArgument) {
				t.Fatalf("refusal %v does not wrap ErrInvalidArgument", err)
			}
			return
		}
		got, err := svc.QueryNewest(ctx, authed, env.GetTargetTopic())
		if err != nil || got.GetSequenceId() != ids[0] || !proto.Equal(got.GetEnvelope(), env) {
			t.Fatalf("admitted envelope reads back as %v, %v", got, err)
		}
	})
}

// FuzzParseTopic: any bytes parse or fail with ErrInvalidArgument, and a
// parsed topic's identifier has its kind's length.
func FuzzParseTopic(f *testing.F) {
	f.Add([]byte{4})
	f.Add(append([]byte{0}, make([]byte, 16)...))
	f.Fuzz(func(t *testing.T, topic []byte) {
		kind, id, err := ParseTopic(topic)
		if err != nil {
			if !errors.Is(err, ports.ErrInvalidArgument) {
				t.Fatalf("ParseTopic error %v does not wrap ErrInvalidArgument", err)
			}
			return
		}
		if len(id) != 32 && !(kind == ports.TopicGroupMessages && len(id) == 16) {
			t.Fatalf("kind 0x%02x accepted a %d-byte identifier", byte(kind), len(id))
		}
	})
}
