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
	"github.com/regroup-mls/regroup/proto/contentspb"
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

// FuzzCheckAddressing: arbitrary 0xff03 and 0xff04 extension bytes never
// panic JOIN-090's check, and an accepted wrapper has its algorithm's size.
func FuzzCheckAddressing(f *testing.F) {
	f.Add(wrapperExt(1, ones(32)).Data, aeadExt(3).Data)
	f.Add([]byte{0xff}, []byte{0x0a, 0x05})
	reg := wrappers{
		ports.WrapperCurve25519:          fakeWrapper{ports.WrapperCurve25519, 32},
		ports.WrapperXWingMLKEM768Draft6: fakeWrapper{ports.WrapperXWingMLKEM768Draft6, 1216},
	}
	f.Fuzz(func(t *testing.T, ff03, ff04 []byte) {
		v := ports.ValidatedKeyPackage{InitKey: ones(32), Extensions: []ports.Extension{{Type: 0xff03, Data: ff03}, {Type: 0xff04, Data: ff04}}}
		if err := CheckAddressing(context.Background(), reg, v); err == nil {
			var w contentspb.WelcomeWrapperEncryption
			if proto.Unmarshal(ff03, &w) != nil {
				t.Fatal("accepted a 0xff03 extension that does not decode")
			}
			if n := len(w.GetPubKey()); n != 32 && n != 1216 {
				t.Fatalf("accepted a %d-byte wrapper key", n)
			}
		}
	})
}
