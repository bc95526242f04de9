package host

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/pluginpb"
)

// FuzzDescription (COMP-150): any bytes a plugin sends as its description
// are decoded and checked without panicking, and a description the host
// accepts obeys every limit, checked here independently entry by entry.
func FuzzDescription(f *testing.F) {
	for _, d := range []*pluginpb.DescribeResponse{
		{Wrappers: []*pluginpb.WrapperDescription{{Id: 2, PublicKeySize: 1216}}},
		{Aeads: []*pluginpb.AeadDescription{{Id: 3, KeySize: 32, NonceSize: 12}}},
		{Wrappers: []*pluginpb.WrapperDescription{{Id: 3, PublicKeySize: 32}, {Id: -1, PublicKeySize: 1 << 31}}},
	} {
		b, err := proto.Marshal(d)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var d pluginpb.DescribeResponse
		if proto.Unmarshal(b, &d) != nil {
			return
		}
		s := newServed()
		s.wrappers[ports.WrapperCurve25519] = "other" // served by another plugin
		if s.check("fuzzed", &d) != nil {
			return
		}
		n := len(d.GetWrappers()) + len(d.GetAeads())
		if n == 0 || n > 64 {
			t.Fatalf("accepted %d algorithms", n)
		}
		seen := map[int32]bool{}
		for _, w := range d.GetWrappers() {
			if w.GetId() <= 0 || w.GetId() == 3 || w.GetId() == 1 || seen[w.GetId()] {
				t.Fatalf("accepted wrapper id %d", w.GetId())
			}
			seen[w.GetId()] = true
			if w.GetPublicKeySize() < 16 || w.GetPublicKeySize() > 2<<20 {
				t.Fatalf("accepted public key size %d", w.GetPublicKeySize())
			}
		}
		seen = map[int32]bool{}
		for _, a := range d.GetAeads() {
			if a.GetId() <= 0 || seen[a.GetId()] {
				t.Fatalf("accepted aead id %d", a.GetId())
			}
			seen[a.GetId()] = true
			if a.GetKeySize() < 16 || a.GetKeySize() > 256 || a.GetNonceSize() < 8 || a.GetNonceSize() > 256 {
				t.Fatalf("accepted aead sizes %d/%d", a.GetKeySize(), a.GetNonceSize())
			}
		}
	})
}
