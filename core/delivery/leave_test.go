package delivery

import (
	"testing"

	"github.com/regroup-mls/regroup/core/internal/mlsframe"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// privateMessage frames a PrivateMessage of the content type with the
// authenticated data (RFC 9420 §6.3), ciphertext left empty.
func privateMessage(contentType byte, ad []byte) []byte {
	b := []byte{0, 1, 0, 2, 2, 'g', 'g', 0, 0, 0, 0, 0, 0, 0, 5, contentType, byte(len(ad))}
	b = append(b, ad...)
	return append(b, 0, 0) // encrypted_sender_data, ciphertext
}

// COMP-475: the service reads a leave request from the framing alone: a
// PrivateMessage application message whose authenticated data is the one
// byte 3; any other kind, content type, framing or a longer
// authenticated data is no leave request.
func TestCOMP475_LeaveRequestFraming(t *testing.T) {
	for _, c := range []struct {
		name string
		msg  []byte
		want bool
	}{
		{"leave", privateMessage(1, []byte{3}), true},
		{"application kind", privateMessage(1, []byte{1}), false},
		{"two bytes", privateMessage(1, []byte{3, 0}), false},
		{"no authenticated data", privateMessage(1, nil), false},
		{"a proposal", privateMessage(2, []byte{3}), false},
		{"a commit", privateMessage(3, []byte{3}), false},
		{"truncated", privateMessage(1, []byte{3})[:16], false},
		{"public message", append([]byte{0, 1, 0, 1}, privateMessage(1, []byte{3})[4:]...), false},
	} {
		if got := isLeaveRequest(c.msg); got != c.want {
			t.Errorf("%s: leave request %v, want %v", c.name, got, c.want)
		}
	}
}

// COMP-476: a page read for an installation that left stops at its
// record's Through, and the bytes of what it drops are counted.
func TestCOMP476_CutLeft(t *testing.T) {
	page := []*backendpb.OriginatorEnvelope{{SequenceId: 3}, {SequenceId: 5}, {SequenceId: 8}}
	got, sizes, dropped, cut := cutLeft(page, []int64{10, 20, 30}, 5)
	if len(got) != 2 || len(sizes) != 2 || dropped != 30 || !cut {
		t.Fatalf("cut at 5: %d envelopes, %d sizes, %d dropped, cut %v", len(got), len(sizes), dropped, cut)
	}
	if got, _, _, cut := cutLeft(page, nil, 8); len(got) != 3 || cut {
		t.Fatalf("cut at 8: %d envelopes, cut %v", len(got), cut)
	}
	if got, _, _, _ := cutLeft(page, nil, 2); len(got) != 0 {
		t.Fatalf("cut at 2: %d envelopes", len(got))
	}
}

// FuzzLeaveRequest: the framing read of any bytes a publisher sends ends
// without a panic, and what it calls a leave request is one.
func FuzzLeaveRequest(f *testing.F) {
	f.Add(privateMessage(1, []byte{3}))
	f.Add(privateMessage(1, []byte{1}))
	f.Add([]byte{0, 1, 0, 2, 0x7f})
	f.Fuzz(func(t *testing.T, b []byte) {
		if isLeaveRequest(b) {
			ct, ad, ok := mlsframe.PeekPrivate(b)
			if !ok || ct != mlsframe.ContentApplication || len(ad) != 1 || ad[0] != 3 {
				t.Fatalf("%x taken for a leave request", b)
			}
		}
	})
}
