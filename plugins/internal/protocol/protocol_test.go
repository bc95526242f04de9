package protocol

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regroup-mls/regroup/adapters/aead"
	"github.com/regroup-mls/regroup/adapters/hpkewrap"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/pluginpb"
)

// TestErrorClassRoundTrip: every ports class survives ToStatus then FromRPC
// with its message, quoted and labelled as the plugin's, and the plugin
// stays usable.
func TestErrorClassRoundTrip(t *testing.T) {
	for _, c := range []error{ports.ErrNotRecipient, ports.ErrUnsupportedAlgorithm, ports.ErrCorrupt,
		ports.ErrInvalidKey, ports.ErrInvalidInput, ports.ErrAlgorithmUnavailable} {
		sent := fmt.Errorf("open thing: %w", c)
		verdict, got := FromRPC(context.Background(), ToStatus(sent))
		if !errors.Is(got, c) || got.Error() != `plugin says "`+sent.Error()+`"` || verdict != Healthy {
			t.Errorf("%v arrived as %q (verdict %v)", c, got, verdict)
		}
	}
	_, got := FromRPC(context.Background(), ToStatus(errors.New("no class")))
	if !errors.Is(got, ports.ErrAlgorithmUnavailable) {
		t.Errorf("classless error arrived as %v", got)
	}
}

// TestTransportFailures: failures without a plugin answer are
// ErrAlgorithmUnavailable, with the caller's context error, and say whether
// the process must be restarted.
func TestTransportFailures(t *testing.T) {
	expired, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	canceled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	cases := []struct {
		why     string
		ctx     context.Context
		err     error
		verdict Verdict
		ctxErr  error
	}{
		{"deadline passed while the plugin hung", expired, status.Error(codes.DeadlineExceeded, "x"), Hung, context.DeadlineExceeded},
		{"plugin timed out before the caller's ctx expired", context.Background(), status.Error(codes.DeadlineExceeded, "x"), Hung, context.DeadlineExceeded},
		{"connection lost (crash)", context.Background(), status.Error(codes.Unavailable, "eof"), Dead, nil},
		{"not a status error", context.Background(), errors.New("boom"), Dead, nil},
		{"plugin saw the deadline itself", expired, ToStatus(fmt.Errorf("seal: %w", context.DeadlineExceeded)), Healthy, context.DeadlineExceeded},
		{"caller canceled while the plugin held the call", canceled, status.Error(codes.Canceled, "x"), Hung, context.Canceled},
		{"plugin sent Canceled of its own", context.Background(), status.Error(codes.Canceled, "x"), Healthy, nil},
		{"reply over the call's limit, or a made-up ResourceExhausted", context.Background(), status.Error(codes.ResourceExhausted, "x"), Healthy, ErrMisbehaved},
		{"error of no class", context.Background(), ToStatus(errors.New("no class")), Healthy, nil},
	}
	for _, c := range cases {
		verdict, got := FromRPC(c.ctx, c.err)
		if !errors.Is(got, ports.ErrAlgorithmUnavailable) || verdict != c.verdict {
			t.Errorf("%s: %v, verdict %v", c.why, got, verdict)
		}
		if c.ctxErr != nil && !errors.Is(got, c.ctxErr) {
			t.Errorf("%s: %v does not wrap %v", c.why, got, c.ctxErr)
		}
		if errors.Is(got, ports.ErrInvalidInput) {
			t.Errorf("%s: %v reads as the caller's fault", c.why, got)
		}
	}
}

// TestNewServerRejects: a plugin must serve something, of a ports type,
// with distinct ids.
func TestNewServerRejects(t *testing.T) {
	for _, impls := range [][]any{
		nil,
		{"not an algorithm"},
		{hpkewrap.NewCurve25519(), hpkewrap.NewCurve25519()},
		{aead.NewChaCha20Poly1305(), aead.NewChaCha20Poly1305()},
	} {
		if _, err := NewServer(impls...); !errors.Is(err, ports.ErrInvalidInput) {
			t.Errorf("NewServer(%v) = %v", impls, err)
		}
	}
}

// TestSanitize: plugin text is cut to MaxErrorText bytes on a rune
// boundary, with the count of what was cut, and quoted so that no control
// character or escape sequence survives.
func TestSanitize(t *testing.T) {
	cases := []struct{ why, in, want string }{
		{"plain", "bad key", `"bad key"`},
		{"newline and ANSI escape", "a\nb\x1b[31mred", `"a\nb\x1b[31mred"`},
		{"invalid UTF-8", "\xff", `"\xff"`},
		{"over the limit", strings.Repeat("x", MaxErrorText+10), `"` + strings.Repeat("x", MaxErrorText) + `" (10 more bytes cut)`},
		{"cut inside a rune", strings.Repeat("x", MaxErrorText-1) + "é!", `"` + strings.Repeat("x", MaxErrorText-1) + `" (3 more bytes cut)`},
	}
	for _, c := range cases {
		if got := Sanitize(c.in); got != c.want {
			t.Errorf("%s: %q, want %q", c.why, got, c.want)
		}
	}
}

// FuzzFromRPC: whatever status a plugin sends, FromRPC maps it to exactly
// one outcome without panicking, keeps at most MaxErrorText bytes of the
// plugin's text (escaped), and never blames the caller's input unless the
// plugin named that class in the protocol's own error detail.
func FuzzFromRPC(f *testing.F) {
	f.Add(uint32(codes.InvalidArgument), int32(pluginpb.ErrorCode_ERROR_CODE_CORRUPT), "bad\n", true)
	f.Add(uint32(codes.ResourceExhausted), int32(0), "big", false)
	f.Add(uint32(codes.Canceled), int32(99), "x", true)
	f.Fuzz(func(t *testing.T, code uint32, class int32, msg string, details bool) {
		st := status.New(codes.Code(code%20), msg)
		if details {
			if d, err := st.WithDetails(&pluginpb.Error{Code: pluginpb.ErrorCode(class), Message: msg}); err == nil {
				st = d
			}
		}
		if st.Code() == codes.OK {
			return
		}
		_, got := FromRPC(context.Background(), st.Err())
		if got == nil {
			t.Fatal("no error")
		}
		if n := len(got.Error()); n > 8*MaxErrorText {
			t.Fatalf("error text of %d bytes", n)
		}
		if strings.ContainsAny(got.Error(), "\n\r\x1b") {
			t.Fatalf("control characters survived: %q", got.Error())
		}
		if errors.Is(got, ports.ErrInvalidInput) && !(details && pluginpb.ErrorCode(class) == pluginpb.ErrorCode_ERROR_CODE_INVALID_INPUT) {
			t.Fatalf("%v blames the input", got)
		}
	})
}
