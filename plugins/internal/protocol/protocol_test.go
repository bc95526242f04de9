package protocol

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/regroup-mls/regroup/adapters/aead"
	"github.com/regroup-mls/regroup/adapters/hpkewrap"
	"github.com/regroup-mls/regroup/ports"
)

// TestErrorClassRoundTrip: every ports class survives ToStatus then FromRPC
// with its message, and the plugin stays usable.
func TestErrorClassRoundTrip(t *testing.T) {
	for _, c := range []error{ports.ErrNotRecipient, ports.ErrUnsupportedAlgorithm, ports.ErrCorrupt,
		ports.ErrInvalidKey, ports.ErrInvalidInput, ports.ErrAlgorithmUnavailable} {
		sent := fmt.Errorf("open thing: %w", c)
		verdict, got := FromRPC(context.Background(), ToStatus(sent))
		if !errors.Is(got, c) || got.Error() != sent.Error() || verdict != Healthy {
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
	}
	for _, c := range cases {
		verdict, got := FromRPC(c.ctx, c.err)
		if !errors.Is(got, ports.ErrAlgorithmUnavailable) || verdict != c.verdict {
			t.Errorf("%s: %v, verdict %v", c.why, got, verdict)
		}
		if c.ctxErr != nil && !errors.Is(got, c.ctxErr) {
			t.Errorf("%s: %v does not wrap %v", c.why, got, c.ctxErr)
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
