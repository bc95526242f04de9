package protocol

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/pluginpb"
)

// ErrMisbehaved reports a plugin that broke the protocol: a reply of the
// wrong size or count, a reply larger than the call allows, a status the
// protocol gives no meaning to, or a description the host refuses. It is
// always wrapped together with ports.ErrAlgorithmUnavailable at call time:
// the fault is the plugin's, not the input's.
var ErrMisbehaved = errors.New("plugin broke the protocol")

// MaxErrorText is how many bytes of a plugin's error text the host keeps;
// the rest is cut and counted.
const MaxErrorText = 512

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
	// Healthy: the plugin answered; the failure is the implementation's
	// or its reply's, and the process may serve the next call.
	Healthy Verdict = iota
	// Dead: the plugin could not be reached (crashed, exited, connection
	// lost); it must be restarted.
	Dead
	// Hung: the call outlived its deadline, or its caller gave up on it,
	// while the plugin still held it; the process must be retired.
	Hung
)

// remoteError is an error that crossed the process boundary, or that the
// host made of a failed call. It reads as msg and unwraps to its classes.
type remoteError struct {
	msg     string
	classes []error
}

func (e *remoteError) Error() string   { return e.msg }
func (e *remoteError) Unwrap() []error { return e.classes }

// Sanitize returns text fit for an error message and a log line: at most
// MaxErrorText bytes of it, cut on a rune boundary with the number of bytes
// cut, quoted so that control characters, newlines and escape sequences
// appear escaped.
func Sanitize(text string) string {
	cut := 0
	if len(text) > MaxErrorText {
		n := MaxErrorText
		for n > 0 && !utf8.RuneStart(text[n]) {
			n--
		}
		cut, text = len(text)-n, text[:n]
	}
	q := strconv.Quote(text)
	if cut > 0 {
		q += fmt.Sprintf(" (%d more bytes cut)", cut)
	}
	return q
}

// FromRPC says whether the plugin process is still usable after an RPC made
// under ctx failed with err, and maps err back to the ports error class the
// plugin reported, or to ports.ErrAlgorithmUnavailable (with the context
// error) when the plugin did not answer or answered outside the protocol.
// The plugin's text is kept only sanitized and labelled as the plugin's.
func FromRPC(ctx context.Context, err error) (Verdict, error) {
	st, ok := status.FromError(err)
	if !ok {
		return Dead, unavailable(ctx, "plugin call failed: "+Sanitize(err.Error()))
	}
	for _, d := range st.Details() {
		pe, ok := d.(*pluginpb.Error)
		if !ok {
			continue
		}
		said := "plugin says " + Sanitize(pe.GetMessage())
		for _, c := range classes {
			if c.code != pe.GetCode() {
				continue
			}
			if c.code == pluginpb.ErrorCode_ERROR_CODE_CANCELED || c.code == pluginpb.ErrorCode_ERROR_CODE_DEADLINE_EXCEEDED {
				return Healthy, unavailable(ctx, said)
			}
			return Healthy, &remoteError{msg: said, classes: []error{c.class}}
		}
		return Healthy, unavailable(ctx, "plugin error of unknown class: "+said)
	}
	switch st.Code() {
	case codes.DeadlineExceeded:
		// The deadline travels to the plugin as grpc-timeout, so its side
		// may time the call out a moment before ctx itself expires; the
		// caller's deadline is what ran out either way.
		return Hung, deadlineExceeded(ctx, "plugin did not answer before the deadline")
	case codes.Canceled:
		if ctx.Err() != nil {
			// The caller gave up while the plugin held the call; nothing
			// says the plugin will ever let it go.
			return Hung, unavailable(ctx, "call canceled while the plugin held it")
		}
		return Healthy, unavailable(ctx, "plugin canceled the call: "+Sanitize(st.Message()))
	case codes.ResourceExhausted:
		// Requests are checked against the size limit before they are
		// sent, so this is a reply over the call's limit or a status the
		// plugin made up: its fault either way.
		return Healthy, misbehaved(ctx, "reply refused: "+Sanitize(st.Message()))
	}
	return Dead, unavailable(ctx, Sanitize(st.Message()))
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

func misbehaved(ctx context.Context, msg string) error {
	err := unavailable(ctx, ErrMisbehaved.Error()+": "+msg).(*remoteError)
	err.classes = append(err.classes, ErrMisbehaved)
	return err
}
