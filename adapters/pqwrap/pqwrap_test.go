package pqwrap

import (
	"context"
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/wrappertest"
)

// invalidMLKEMKey returns a 1,216-byte X-Wing public key whose ML-KEM part
// fails the encapsulation key check (a coefficient of 4095 >= q).
func invalidMLKEMKey(t testing.TB) []byte {
	pub, _, err := NewXWing().GenerateKey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pub[0], pub[1] = 0xff, 0xff
	return pub
}

func caps(t testing.TB) wrappertest.Caps {
	return wrappertest.Caps{
		PublicKeySize:       1216,
		PrivateKeySize:      32,
		HPKELayout:          true,
		EncapsulatedKeySize: 1120,
		TagSize:             16,
		InvalidPublicKeys:   [][]byte{invalidMLKEMKey(t)},
		Concurrent:          true,
	}
}

// TestContractDraft06 runs the wrapper suite on
// WELCOME_WRAPPER_ALGORITHM_XWING_MLKEM_768_DRAFT_6 (KEM id 0x004D).
func TestContractDraft06(t *testing.T) {
	wrappertest.Run(t, func(ctx context.Context, t *testing.T) (wrappertest.Harness, error) {
		return wrappertest.Static(NewXWing(), caps(t)), nil
	})
}

// TestContractCanonical runs the wrapper suite on the 0x647A algorithm.
func TestContractCanonical(t *testing.T) {
	wrappertest.Run(t, func(ctx context.Context, t *testing.T) (wrappertest.Harness, error) {
		return wrappertest.Static(NewXWingCanonical(), caps(t)), nil
	})
}

// TestJOIN076RelabelledWelcomeDoesNotOpen: a Welcome sealed under one
// wrapper algorithm does not open under another, so a message whose
// wrapper_algorithm was changed in transit fails instead of being read under
// the wrong algorithm.
func TestJOIN076RelabelledWelcomeDoesNotOpen(t *testing.T) {
	ctx := context.Background()
	draft, canonical := NewXWing(), NewXWingCanonical()
	info := ports.WelcomeWrapperInfo()
	pub, priv, err := draft.GenerateKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := draft.Seal(ctx, pub, info, []byte("welcome"), []byte("meta"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := draft.Open(ctx, priv, info, sealed...); err != nil {
		t.Fatalf("draft-06 open: %v", err)
	}
	if _, err := canonical.Open(ctx, priv, info, sealed...); !errors.Is(err, ports.ErrNotRecipient) {
		t.Fatalf("0x647A open of a 0x004D Welcome: %v, want ErrNotRecipient", err)
	}
}

// TestJOIN090Sizes: X-Wing public keys are 1,216 bytes and private keys
// 32-byte seeds; the ids are the wire value and the local canonical id.
func TestJOIN090Sizes(t *testing.T) {
	for _, x := range []*XWing{NewXWing(), NewXWingCanonical()} {
		if x.PublicKeySize() != 1216 {
			t.Errorf("%v: PublicKeySize %d", x.ID(), x.PublicKeySize())
		}
	}
	if NewXWing().ID() != ports.WrapperXWingMLKEM768Draft6 || NewXWing().KEMID() != 0x004D {
		t.Error("draft-06 wrapper has the wrong ids")
	}
	if NewXWingCanonical().ID() != ports.WrapperXWingCanonical || NewXWingCanonical().KEMID() != 0x647A {
		t.Error("canonical wrapper has the wrong ids")
	}
	if ports.WrapperXWingCanonical < ports.LocalWrapperIDBase {
		t.Error("canonical id is inside the wire range")
	}
}

// FuzzOpen: Open of arbitrary bytes as an X-Wing Welcome never panics and
// fails with ErrCorrupt or ErrNotRecipient.
func FuzzOpen(f *testing.F) {
	x := NewXWing()
	ctx := context.Background()
	pub, priv, err := x.GenerateKey(ctx)
	if err != nil {
		f.Fatal(err)
	}
	sealed, err := x.Seal(ctx, pub, ports.WelcomeWrapperInfo(), []byte("welcome"), []byte("meta"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sealed[0], sealed[1])
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, data, meta []byte) {
		_, err := x.Open(ctx, priv, ports.WelcomeWrapperInfo(), data, meta)
		if err != nil && !errors.Is(err, ports.ErrCorrupt) && !errors.Is(err, ports.ErrNotRecipient) {
			t.Fatalf("error %v is neither ErrCorrupt nor ErrNotRecipient", err)
		}
	})
}
