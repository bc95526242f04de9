package protocol

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/pluginpb"
)

var classes = []struct {
	code  pluginpb.ErrorCode
	class error
	grpc  codes.Code
}{
	{pluginpb.ErrorCode_ERROR_CODE_NOT_RECIPIENT, ports.ErrNotRecipient, codes.InvalidArgument},
	{pluginpb.ErrorCode_ERROR_CODE_UNSUPPORTED_ALGORITHM, ports.ErrUnsupportedAlgorithm, codes.Unimplemented},
	{pluginpb.ErrorCode_ERROR_CODE_CORRUPT, ports.ErrCorrupt, codes.InvalidArgument},
	{pluginpb.ErrorCode_ERROR_CODE_INVALID_KEY, ports.ErrInvalidKey, codes.InvalidArgument},
	{pluginpb.ErrorCode_ERROR_CODE_INVALID_INPUT, ports.ErrInvalidInput, codes.InvalidArgument},
	{pluginpb.ErrorCode_ERROR_CODE_UNAVAILABLE, ports.ErrAlgorithmUnavailable, codes.Unavailable},
	{pluginpb.ErrorCode_ERROR_CODE_CANCELED, context.Canceled, codes.Canceled},
	{pluginpb.ErrorCode_ERROR_CODE_DEADLINE_EXCEEDED, context.DeadlineExceeded, codes.DeadlineExceeded},
}

// ToStatus turns an implementation's error into a gRPC status error whose
// details carry the error's ports class and message.
func ToStatus(err error) error {
	code, gc := pluginpb.ErrorCode_ERROR_CODE_UNSPECIFIED, codes.Internal
	for _, c := range classes {
		if errors.Is(err, c.class) {
			code, gc = c.code, c.grpc
			break
		}
	}
	st, derr := status.New(gc, err.Error()).WithDetails(&pluginpb.Error{Code: code, Message: err.Error()})
	if derr != nil {
		return status.Error(gc, err.Error())
	}
	return st.Err()
}

// Verdict says what an RPC failure means for the plugin process.
type Verdict int

const (
	// Healthy: the plugin answered; the failure is the implementation's.
	Healthy Verdict = iota
	// Dead: the plugin could not be reached (crashed, exited, connection
	// lost); it must be restarted.
	Dead
	// Hung: the call outlived its deadline; the plugin must be restarted.
	Hung
)

// remoteError is an implementation error that crossed the process boundary.
// It reads as the plugin's message and unwraps to the ports class (and to the
// host's context error when the call ran out of time).
type remoteError struct {
	msg     string
	classes []error
}

func (e *remoteError) Error() string   { return e.msg }
func (e *remoteError) Unwrap() []error { return e.classes }

// FromRPC says whether the plugin process is still usable after an RPC made
// under ctx failed with err, and maps err back to the ports error class the
// plugin reported, or to ports.ErrAlgorithmUnavailable (with the context
// error) when the plugin did not answer.
func FromRPC(ctx context.Context, err error) (Verdict, error) {
	st, ok := status.FromError(err)
	if !ok {
		return Dead, unavailable(ctx, err.Error())
	}
	for _, d := range st.Details() {
		pe, ok := d.(*pluginpb.Error)
		if !ok {
			continue
		}
		for _, c := range classes {
			if c.code != pe.GetCode() {
				continue
			}
			if c.code == pluginpb.ErrorCode_ERROR_CODE_CANCELED || c.code == pluginpb.ErrorCode_ERROR_CODE_DEADLINE_EXCEEDED {
				return Healthy, unavailable(ctx, pe.GetMessage())
			}
			return Healthy, &remoteError{msg: pe.GetMessage(), classes: []error{c.class}}
		}
		return Healthy, fmt.Errorf("%w: plugin error of unknown class: %s", ports.ErrAlgorithmUnavailable, pe.GetMessage())
	}
	switch st.Code() {
	case codes.DeadlineExceeded:
		// The deadline travels to the plugin as grpc-timeout, so its side
		// may time the call out a moment before ctx itself expires; the
		// caller's deadline is what ran out either way.
		return Hung, deadlineExceeded(ctx, "plugin did not answer before the deadline")
	case codes.Canceled:
		return Healthy, unavailable(ctx, "call canceled")
	case codes.ResourceExhausted:
		return Healthy, fmt.Errorf("%w: %s", ports.ErrInvalidInput, st.Message())
	}
	return Dead, unavailable(ctx, st.Message())
}

func deadlineExceeded(ctx context.Context, msg string) error {
	err := unavailable(ctx, msg).(*remoteError)
	if ctx.Err() == nil {
		err.classes = append(err.classes, context.DeadlineExceeded)
	}
	return err
}

func unavailable(ctx context.Context, msg string) error {
	classes := []error{ports.ErrAlgorithmUnavailable}
	if cerr := ctx.Err(); cerr != nil {
		classes = append(classes, cerr)
	}
	return &remoteError{msg: ports.ErrAlgorithmUnavailable.Error() + ": " + msg, classes: classes}
}
