package grpctransport

import (
	"sync"
	"testing"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/proto/deliverypb"
)

// COMP-148: the server's codec never fails a request; it notes exactly
// the requests proto.Unmarshal refuses (checked independently here), so
// the handler answers them InvalidArgument.
func FuzzLenientCodec(f *testing.F) {
	f.Add([]byte{0x0a, 0x40, 0x01})
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00})
	f.Add([]byte{})
	ok, _ := proto.Marshal(&deliverypb.QueryRequest{Topic: []byte{4, 1}, After: 7, Limit: 3})
	f.Add(ok)
	f.Fuzz(func(t *testing.T, b []byte) {
		failed := &sync.Map{}
		c := lenientCodec{base: encoding.GetCodecV2("proto"), failed: failed}
		for _, m := range []proto.Message{&deliverypb.PublishRequest{}, &deliverypb.QueryRequest{}, &deliverypb.SubscribeRequest{},
			&deliverypb.AuthenticateRequest{}} {
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, m); err != nil {
				t.Fatalf("codec failed a request: %v", err)
			}
			_, noted := failed.LoadAndDelete(m)
			want := proto.Unmarshal(b, proto.Clone(m)) != nil
			if noted != want {
				t.Fatalf("%T: noted a failure %v, proto.Unmarshal fails %v", m, noted, want)
			}
		}
	})
}
