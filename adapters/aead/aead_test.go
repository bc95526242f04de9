package aead

import (
	"context"
	"encoding/hex"
	"testing"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/aeadtest"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rfc8439 returns the AEAD_CHACHA20_POLY1305 vectors of RFC 8439: section
// 2.8.2 is checked through its published tag (the ciphertext part is
// recomputed and the tag, which authenticates all of it, must match), the
// empty-message vector in full.
func knownAnswers(t testing.TB) []aeadtest.KnownAnswer {
	key := mustHex(t, "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f")
	return []aeadtest.KnownAnswer{{
		Name:  "empty message",
		Key:   key,
		Nonce: mustHex(t, "070000004041424344454647"),
		Out:   mustHex(t, "a0784d7a4716f3feb4f64e7f4b39bf04"),
	}}
}

// TestRFC8439Section282Tag checks the tag of RFC 8439 section 2.8.2.
func TestRFC8439Section282Tag(t *testing.T) {
	pt := []byte("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.")
	ct, err := NewChaCha20Poly1305().Seal(context.Background(),
		mustHex(t, "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"),
		mustHex(t, "070000004041424344454647"), pt, mustHex(t, "50515253c0c1c2c3c4c5c6c7"))
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(ct[len(ct)-16:]); got != "1ae10b594f09e26a7e902ecbd0600691" {
		t.Fatalf("tag %s", got)
	}
	if got := hex.EncodeToString(ct[:16]); got != "d31a8d34648e60db7b86afbc53ef7ec2" {
		t.Fatalf("first ciphertext block %s", got)
	}
}

// TestContract runs the pointee AEAD suite on CHACHA20_POLY1305 (JOIN-078:
// 32-byte key, 12-byte nonce; JOIN-064: unauthentic input is rejected).
func TestContract(t *testing.T) {
	aeadtest.Run(t, func(ctx context.Context, t *testing.T) (aeadtest.Harness, error) {
		return aeadtest.Static(NewChaCha20Poly1305(), aeadtest.Caps{
			KeySize: 32, NonceSize: 12, TagSize: 16,
			KnownAnswers: knownAnswers(t),
			Concurrent:   true,
		}), nil
	})
}

// TestJOIN078ID: the AEAD is WELCOME_POINTEE_ENCRYPTION_AEAD_TYPE_CHACHA20_POLY1305 = 3.
func TestJOIN078ID(t *testing.T) {
	if NewChaCha20Poly1305().ID() != ports.PointeeAEADChaCha20Poly1305 || ports.PointeeAEADChaCha20Poly1305 != 3 {
		t.Fatal("wrong aead_type")
	}
}
