package algorithm

import (
	"context"
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

// fakeWrapper is a registration-only double: the registry never calls
// anything but ID.
type fakeWrapper struct {
	ports.WrapperAlgorithm
	id ports.WrapperAlgorithmID
}

func (f fakeWrapper) ID() ports.WrapperAlgorithmID { return f.id }

type fakeAEAD struct {
	ports.PointeeAEAD
	id ports.PointeeAEADID
}

func (f fakeAEAD) ID() ports.PointeeAEADID { return f.id }

// TestJOIN087UnsupportedWrapperIsTyped: an id nobody registered yields an
// error core can hold the Welcome on: it wraps ErrUnsupportedAlgorithm and
// carries the id.
func TestJOIN087UnsupportedWrapperIsTyped(t *testing.T) {
	r, err := New(fakeWrapper{id: ports.WrapperCurve25519})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []ports.WrapperAlgorithmID{ports.WrapperUnspecified, ports.WrapperXWingMLKEM768Draft6, ports.WrapperSymmetricKey, 99} {
		_, err := r.Wrapper(id)
		if !errors.Is(err, ports.ErrUnsupportedAlgorithm) {
			t.Fatalf("Wrapper(%v) = %v, want ErrUnsupportedAlgorithm", id, err)
		}
		var ue *UnsupportedWrapperError
		if !errors.As(err, &ue) || ue.ID != id {
			t.Fatalf("Wrapper(%v) error carries no id: %v", id, err)
		}
	}
	if w, err := r.Wrapper(ports.WrapperCurve25519); err != nil || w.ID() != ports.WrapperCurve25519 {
		t.Fatalf("registered wrapper not found: %v", err)
	}
}

// TestJOIN087UnsupportedAEADIsTyped: the same for aead_type.
func TestJOIN087UnsupportedAEADIsTyped(t *testing.T) {
	var r Registry
	_, err := r.PointeeAEAD(ports.PointeeAEADChaCha20Poly1305)
	var ue *UnsupportedAEADError
	if !errors.Is(err, ports.ErrUnsupportedAlgorithm) || !errors.As(err, &ue) || ue.ID != 3 {
		t.Fatalf("PointeeAEAD(3) on an empty registry = %v", err)
	}
}

// TestJOIN076LookupIsByWireID: the registry returns exactly the algorithm
// registered under the id on the message, never another one.
func TestJOIN076LookupIsByWireID(t *testing.T) {
	r, err := New(fakeWrapper{id: 1}, fakeWrapper{id: 2}, fakeWrapper{id: ports.WrapperXWingCanonical}, fakeAEAD{id: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []ports.WrapperAlgorithmID{1, 2, ports.WrapperXWingCanonical} {
		w, err := r.Wrapper(id)
		if err != nil || w.ID() != id {
			t.Fatalf("Wrapper(%v) = %v, %v", id, w, err)
		}
	}
	if got := r.Wrappers(); len(got) != 3 || got[0] != 1 || got[2] != ports.WrapperXWingCanonical {
		t.Fatalf("Wrappers() = %v", got)
	}
	if got := r.PointeeAEADs(); len(got) != 1 || got[0] != 3 {
		t.Fatalf("PointeeAEADs() = %v", got)
	}
}

// TestRegisterRejects covers the registrations that must fail and leave the
// registry unchanged.
func TestRegisterRejects(t *testing.T) {
	r, _ := New(fakeWrapper{id: 1})
	cases := []struct {
		why   string
		impls []any
		want  error
	}{
		{"duplicate of a registered id", []any{fakeWrapper{id: 1}}, ErrAlreadyRegistered},
		{"duplicate inside one call", []any{fakeWrapper{id: 2}, fakeWrapper{id: 2}}, ErrAlreadyRegistered},
		{"UNSPECIFIED names no algorithm", []any{fakeWrapper{id: 0}}, ports.ErrInvalidInput},
		{"SYMMETRIC_KEY is a pointee marker", []any{fakeWrapper{id: 3}}, ports.ErrInvalidInput},
		{"UNSPECIFIED aead", []any{fakeAEAD{id: 0}}, ports.ErrInvalidInput},
		{"not an algorithm", []any{fakeWrapper{id: 2}, context.Background()}, ports.ErrInvalidInput},
	}
	for _, c := range cases {
		if err := r.Register(c.impls...); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.why, err, c.want)
		}
	}
	if got := r.Wrappers(); len(got) != 1 {
		t.Fatalf("failed registrations changed the registry: %v", got)
	}
}
