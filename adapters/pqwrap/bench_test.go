package pqwrap

import (
	"bytes"
	"context"
	"crypto/hpke"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/hpkewrap"
	"github.com/regroup-mls/regroup/ports"
)

// BenchmarkSeal seals a 4 KiB Welcome and its metadata with the 0x647A
// wrapper and, in the same loop, with the standard library's crypto/hpke
// MLKEM768X25519 as the reference; it reports both and the ratio.
func BenchmarkSeal(b *testing.B) {
	ctx := context.Background()
	x := NewXWingCanonical()
	info := ports.WelcomeWrapperInfo()
	welcome, meta := bytes.Repeat([]byte{7}, 4096), bytes.Repeat([]byte{9}, 64)
	pub, _, err := x.GenerateKey(ctx)
	if err != nil {
		b.Fatal(err)
	}
	pk, err := hpke.MLKEM768X25519().NewPublicKey(pub)
	if err != nil {
		b.Fatal(err)
	}
	var tOurs, tRef time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := x.Seal(ctx, pub, info, welcome, meta); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		_, s, err := hpke.NewSender(pk, hpke.HKDFSHA256(), hpke.ChaCha20Poly1305(), info)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = s.Seal(nil, welcome)
		_, _ = s.Seal(nil, meta)
		tOurs += t1.Sub(t0)
		tRef += time.Since(t1)
	}
	b.ReportMetric(float64(tOurs.Nanoseconds())/float64(b.N), "pqwrap-ns/op")
	b.ReportMetric(float64(tRef.Nanoseconds())/float64(b.N), "cryptohpke-ns/op")
	b.ReportMetric(float64(tOurs)/float64(tRef), "pqwrap/cryptohpke")
}

// BenchmarkOpen opens what BenchmarkSeal seals, against crypto/hpke.
func BenchmarkOpen(b *testing.B) {
	ctx := context.Background()
	x := NewXWingCanonical()
	info := ports.WelcomeWrapperInfo()
	welcome, meta := bytes.Repeat([]byte{7}, 4096), bytes.Repeat([]byte{9}, 64)
	pub, seed, err := x.GenerateKey(ctx)
	if err != nil {
		b.Fatal(err)
	}
	sealed, err := x.Seal(ctx, pub, info, welcome, meta)
	if err != nil {
		b.Fatal(err)
	}
	sk, err := hpke.MLKEM768X25519().NewPrivateKey(seed)
	if err != nil {
		b.Fatal(err)
	}
	enc, ct, err := hpkewrap.ParseCiphertext(sealed[0])
	if err != nil {
		b.Fatal(err)
	}
	var tOurs, tRef time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := x.Open(ctx, seed, info, sealed...); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		r, err := hpke.NewRecipient(enc, sk, hpke.HKDFSHA256(), hpke.ChaCha20Poly1305(), info)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.Open(nil, ct); err != nil {
			b.Fatal(err)
		}
		if _, err := r.Open(nil, sealed[1]); err != nil {
			b.Fatal(err)
		}
		tOurs += t1.Sub(t0)
		tRef += time.Since(t1)
	}
	b.ReportMetric(float64(tOurs.Nanoseconds())/float64(b.N), "pqwrap-ns/op")
	b.ReportMetric(float64(tRef.Nanoseconds())/float64(b.N), "cryptohpke-ns/op")
	b.ReportMetric(float64(tOurs)/float64(tRef), "pqwrap/cryptohpke")
}
