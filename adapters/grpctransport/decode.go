package grpctransport

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/regroup-mls/regroup/proto/deliverypb"
)

// A request that does not decode — truncated protobuf, a string field
// that is not UTF-8 (IdentityUpdate.inbox_id), a bad compression — is
// the client's fault: it fails with InvalidArgument naming the decode
// error (COMP-148). gRPC answers a codec failure with INTERNAL on its
// own, before any handler runs, so the server's codec never fails a
// request: it notes the failure against the message, and the handlers'
// decode step (wrapped by serviceDesc) turns the note into
// InvalidArgument.

// lenientCodec is the proto codec whose Unmarshal notes a failure in
// failed instead of returning it.
type lenientCodec struct {
	base   encoding.CodecV2
	failed *sync.Map // message → decode error
}

func (c lenientCodec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }
func (c lenientCodec) Name() string                           { return c.base.Name() }

func (c lenientCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if err := c.base.Unmarshal(data, v); err != nil {
		c.failed.Store(v, err)
	}
	return nil
}

// decoded returns the InvalidArgument status of a request v that did not
// decode, or err unchanged.
func (s *Server) decoded(v any, err error) error {
	if failure, ok := s.undecodable.LoadAndDelete(v); ok {
		s.meter.decode.Add(1)
		return status.Error(codes.InvalidArgument, fmt.Sprintf("request does not decode: %v", failure))
	}
	return err
}

// serviceDesc is the Delivery service whose handlers check the codec's
// note after decoding their request.
func (s *Server) serviceDesc() *grpc.ServiceDesc {
	d := deliverypb.Delivery_ServiceDesc
	d.Methods = append([]grpc.MethodDesc(nil), d.Methods...)
	for i, m := range d.Methods {
		h := m.Handler
		d.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			return h(srv, ctx, func(v any) error { return s.decoded(v, dec(v)) }, ic)
		}
	}
	d.Streams = append([]grpc.StreamDesc(nil), d.Streams...)
	for i, st := range d.Streams {
		h := st.Handler
		d.Streams[i].Handler = func(srv any, stream grpc.ServerStream) error {
			return h(srv, decodeStream{ServerStream: stream, s: s})
		}
	}
	return &d
}

// decodeStream is a server stream whose requests are checked like the
// unary ones.
type decodeStream struct {
	grpc.ServerStream
	s *Server
}

func (d decodeStream) RecvMsg(m any) error { return d.s.decoded(m, d.ServerStream.RecvMsg(m)) }
