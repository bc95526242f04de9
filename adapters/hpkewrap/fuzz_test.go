package hpkewrap

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

// FuzzParseCiphertext: the HpkeCiphertext decoder never panics, fails only
// with ErrCorrupt, and what it accepts re-encodes to the same bytes (the
// encoding is canonical).
func FuzzParseCiphertext(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x01, 0xaa, 0x01, 0xbb})
	f.Add([]byte{0x40, 0x40})
	f.Add([]byte{0xc0})
	if b, err := MarshalCiphertext(make([]byte, 32), make([]byte, 100)); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		enc, ct, err := ParseCiphertext(b)
		if err != nil {
			if !errors.Is(err, ports.ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		again, err := MarshalCiphertext(enc, ct)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("accepted %x but re-encodes to %x (%v)", b, again, err)
		}
	})
}

// FuzzOpen: Open of arbitrary bytes as a CURVE25519 Welcome never panics
// and fails with ErrCorrupt or ErrNotRecipient.
func FuzzOpen(f *testing.F) {
	c := NewCurve25519()
	ctx := context.Background()
	pub, priv, err := c.GenerateKey(ctx)
	if err != nil {
		f.Fatal(err)
	}
	sealed, err := c.Seal(ctx, pub, ports.WelcomeWrapperInfo(), []byte("welcome"), []byte("meta"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sealed[0], sealed[1])
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, data, meta []byte) {
		_, err := c.Open(ctx, priv, ports.WelcomeWrapperInfo(), data, meta)
		if err != nil && !errors.Is(err, ports.ErrCorrupt) && !errors.Is(err, ports.ErrNotRecipient) {
			t.Fatalf("error %v is neither ErrCorrupt nor ErrNotRecipient", err)
		}
	})
}
