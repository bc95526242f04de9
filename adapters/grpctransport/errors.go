package grpctransport

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regroup-mls/regroup/ports"
)

// ToStatus turns a delivery-service error into the gRPC status that carries
// its class across the wire; [FromStatus] turns it back. The message keeps
// the error's text only for the classes a client causes (invalid
// argument, not found, unauthenticated, rate limited, a commit for
// another epoch: Aborted), whose reasons are
// the service's own; every other failure — a database outage, a closed
// store, anything unclassified — answers a bare "unavailable" (COMP-147),
// since its text may name the database's user, host and port. A [Server]
// logs what it hides.
func ToStatus(err error) error {
	st, _ := toStatus(err)
	return st
}

// exposed marks an unavailable error whose text is the service's own and
// may reach the client (a shutdown, a shed slow reader).
type exposed struct{ error }

func (e exposed) Unwrap() error { return e.error }

// toStatus is [ToStatus], and reports whether it hid the error's text.
func toStatus(err error) (error, bool) {
	if err == nil {
		return nil, false
	}
	if _, ok := status.FromError(err); ok && !isPortsErr(err) {
		return err, false
	}
	code := codes.Unavailable
	switch {
	case errors.Is(err, ports.ErrBlocked):
		// Before InvalidArgument, which it wraps (COMP-501).
		return status.Error(codes.PermissionDenied, err.Error()), false
	case errors.Is(err, ports.ErrQuarantined):
		// Before InvalidArgument, which it wraps.
		return status.Error(codes.FailedPrecondition, err.Error()), false
	case errors.Is(err, ports.ErrOtherChain):
		// Before ErrCatchUp, which it wraps: a prefix more.
		return status.Error(codes.Aborted, catchUpPrefix+otherChainPrefix+err.Error()), false
	case errors.Is(err, ports.ErrCatchUp):
		// Aborted like an epoch conflict, told apart by its prefix.
		return status.Error(codes.Aborted, catchUpPrefix+err.Error()), false
	case errors.Is(err, ports.ErrCommitPending):
		// Aborted like an epoch conflict, told apart by its prefix.
		return status.Error(codes.Aborted, commitPendingPrefix+err.Error()), false
	case errors.Is(err, ports.ErrInvalidArgument):
		code = codes.InvalidArgument
	case errors.Is(err, ports.ErrNotFound):
		code = codes.NotFound
	case errors.Is(err, ports.ErrUnauthenticated):
		code = codes.Unauthenticated
	case errors.Is(err, ports.ErrRateLimited):
		code = codes.ResourceExhausted
	case errors.Is(err, ports.ErrEpochConflict):
		code = codes.Aborted
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "deadline exceeded"), false
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "canceled"), false
	default:
		var e exposed
		if errors.As(err, &e) {
			return status.Error(code, err.Error()), false
		}
		return status.Error(code, "unavailable"), true
	}
	return status.Error(code, err.Error()), false
}

// status turns err into the status a client sees; what that hides is
// logged with a reference the client's message carries.
func (s *Server) status(ctx context.Context, err error) error {
	st, hidden := toStatus(err)
	if !hidden {
		return st
	}
	ref := make([]byte, 6)
	_, _ = rand.Read(ref)
	s.meter.hidden.Add(1)
	s.opts.Logger.Warn("call failed; the client was told unavailable", "ref", hex.EncodeToString(ref), "err", err)
	return status.Error(codes.Unavailable, "unavailable (ref "+hex.EncodeToString(ref)+")")
}

// commitPendingPrefix starts the message of an Aborted status that
// carries [ports.ErrCommitPending] (COMP-419).
const commitPendingPrefix = "commit pending: "

// catchUpPrefix starts the message of an Aborted status that carries
// [ports.ErrCatchUp].
const catchUpPrefix = "catch-up: "

// otherChainPrefix follows catchUpPrefix in the message of an Aborted
// status that carries [ports.ErrOtherChain] (COMP-522).
const otherChainPrefix = "other chain: "

// errNoWitness answers Report and Lift on a service that takes neither.
var errNoWitness = fmt.Errorf("%w: the delivery service takes no reports or lifts (commit acceptance in two phases is off)", ports.ErrInvalidArgument)

func isPortsErr(err error) bool {
	for _, s := range []error{ports.ErrCatchUp, ports.ErrCommitPending, ports.ErrInvalidArgument, ports.ErrNotFound, ports.ErrUnauthenticated,
		ports.ErrRateLimited, ports.ErrEpochConflict, ports.ErrConflict, ports.ErrUnavailable, ports.ErrClosed} {
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
// Aborted → [ports.ErrEpochConflict] (or [ports.ErrCommitPending] when its
// message starts "commit pending: ", [ports.ErrCatchUp] when it starts
// "catch-up: ", [ports.ErrOtherChain] when "catch-up: other chain: "), FailedPrecondition →
// [ports.ErrQuarantined], PermissionDenied → [ports.ErrBlocked], anything else → [ports.ErrUnavailable] (the outcome is unknown and the
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
	case codes.Aborted:
		if strings.HasPrefix(msg, catchUpPrefix+otherChainPrefix) {
			return fmt.Errorf("%s: %w: %s", op, ports.ErrOtherChain, strings.TrimPrefix(msg, catchUpPrefix+otherChainPrefix))
		}
		if strings.HasPrefix(msg, catchUpPrefix) {
			return fmt.Errorf("%s: %w: %s", op, ports.ErrCatchUp, strings.TrimPrefix(msg, catchUpPrefix))
		}
		if strings.HasPrefix(msg, commitPendingPrefix) {
			return fmt.Errorf("%s: %w: %s", op, ports.ErrCommitPending, strings.TrimPrefix(msg, commitPendingPrefix))
		}
		return fmt.Errorf("%s: %w: %s", op, ports.ErrEpochConflict, msg)
	case codes.FailedPrecondition:
		return fmt.Errorf("%s: %w: %s", op, ports.ErrQuarantined, msg)
	case codes.PermissionDenied:
		return fmt.Errorf("%s: %w: %s", op, ports.ErrBlocked, msg)
	case codes.DeadlineExceeded:
		return fmt.Errorf("%s: %w: %w", op, ports.ErrUnavailable, context.DeadlineExceeded)
	case codes.Canceled:
		return fmt.Errorf("%s: %w: %w", op, ports.ErrUnavailable, context.Canceled)
	}
	return fmt.Errorf("%s: %w: %s: %s", op, ports.ErrUnavailable, st.Code(), msg)
}
