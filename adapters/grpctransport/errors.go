package grpctransport

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regroup-mls/regroup/ports"
)

// ToStatus turns a delivery-service error into the gRPC status that carries
// its class across the wire; [FromStatus] turns it back. The message keeps
// the error's text, so a refused envelope's reason reaches the publisher.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && !isPortsErr(err) {
		return err
	}
	code := codes.Internal
	switch {
	case errors.Is(err, ports.ErrInvalidArgument):
		code = codes.InvalidArgument
	case errors.Is(err, ports.ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, ports.ErrUnauthenticated):
		code = codes.Unauthenticated
	case errors.Is(err, ports.ErrRateLimited):
		code = codes.ResourceExhausted
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, ports.ErrConflict):
		code = codes.Aborted
	case errors.Is(err, ports.ErrUnavailable), errors.Is(err, ports.ErrClosed):
		code = codes.Unavailable
	}
	return status.Error(code, err.Error())
}

func isPortsErr(err error) bool {
	for _, s := range []error{ports.ErrInvalidArgument, ports.ErrNotFound, ports.ErrUnauthenticated,
		ports.ErrRateLimited, ports.ErrConflict, ports.ErrUnavailable, ports.ErrClosed} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// FromStatus turns an error from a gRPC call into one wrapping the ports
// sentinel of its class: InvalidArgument → [ports.ErrInvalidArgument],
// NotFound → [ports.ErrNotFound], Unauthenticated →
// [ports.ErrUnauthenticated], ResourceExhausted → [ports.ErrRateLimited],
// anything else → [ports.ErrUnavailable] (the outcome is unknown and the
// call may be retried). When ctx has ended, the result also wraps ctx's
// error.
func FromStatus(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctx != nil && ctx.Err() != nil {
		return fmt.Errorf("%s: %w: %w", op, ports.ErrUnavailable, ctx.Err())
	}
	st, _ := status.FromError(err)
	msg := st.Message()
	switch st.Code() {
	case codes.InvalidArgument:
		return fmt.Errorf("%s: %w: %s", op, ports.ErrInvalidArgument, msg)
	case codes.NotFound:
		return fmt.Errorf("%s: %w: %s", op, ports.ErrNotFound, msg)
	case codes.Unauthenticated:
		return fmt.Errorf("%s: %w: %s", op, ports.ErrUnauthenticated, msg)
	case codes.ResourceExhausted:
		return fmt.Errorf("%s: %w: %s", op, ports.ErrRateLimited, msg)
	case codes.DeadlineExceeded:
		return fmt.Errorf("%s: %w: %w", op, ports.ErrUnavailable, context.DeadlineExceeded)
	case codes.Canceled:
		return fmt.Errorf("%s: %w: %w", op, ports.ErrUnavailable, context.Canceled)
	}
	return fmt.Errorf("%s: %w: %s: %s", op, ports.ErrUnavailable, st.Code(), msg)
}
