package grpctransport

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regroup-mls/regroup/proto/deliverypb"
)

// serviceDesc is the Delivery service with every request decode wrapped
// so that a request that does not decode — truncated protobuf, a string
// field that is not UTF-8 (IdentityUpdate.inbox_id), a bad compression —
// fails with InvalidArgument naming the decode error (COMP-148); gRPC
// itself answers such requests with INTERNAL, as if the server were at
// fault.
func (s *Server) serviceDesc() *grpc.ServiceDesc {
	d := deliverypb.Delivery_ServiceDesc
	d.Methods = append([]grpc.MethodDesc(nil), d.Methods...)
	for i, m := range d.Methods {
		h := m.Handler
		d.Methods[i].Handler = func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			return h(srv, ctx, func(v any) error { return s.decodeErr(dec(v)) }, ic)
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

// decodeErr turns a failure to decode a request (gRPC reports it as
// INTERNAL) into InvalidArgument; other failures (a message over the
// size limit, a cancelled call) keep their status.
func (s *Server) decodeErr(err error) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.Internal && st.Code() != codes.Unknown {
		return err
	}
	s.meter.decode.Add(1)
	return status.Error(codes.InvalidArgument, "request does not decode: "+status.Convert(err).Message())
}

// decodeStream is a server stream whose request decode failures are
// invalid arguments.
type decodeStream struct {
	grpc.ServerStream
	s *Server
}

func (d decodeStream) RecvMsg(m any) error {
	err := d.ServerStream.RecvMsg(m)
	if _, ok := status.FromError(err); !ok || err == nil {
		return err // io.EOF and transport errors pass through
	}
	return d.s.decodeErr(err)
}
