package keyschedule_test

import (
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/keyschedule"
)

// BenchmarkKeySchedule measures the derivation of one epoch's secrets
// (Derive: two Extracts, 12 ExpandWithLabel calls) next to one DeriveSecret
// as the reference, in suite 3.
func BenchmarkKeySchedule(b *testing.B) {
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	init, commit, gc := make([]byte, 32), make([]byte, 32), make([]byte, 120)
	b.Run("epoch", func(b *testing.B) {
		for b.Loop() {
			e, err := keyschedule.Derive(s, init, commit, nil, gc)
			if err != nil {
				b.Fatal(err)
			}
			init = e.InitSecret
		}
	})
	b.Run("reference-derive-secret", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.DeriveSecret(init, "epoch"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
