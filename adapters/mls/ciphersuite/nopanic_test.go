package ciphersuite_test

import (
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
)

// TestNoPanicOnHostileInput calls every operation with empty, short and
// oversized inputs: each must return (an error or a value), never panic.
func TestNoPanicOnHostileInput(t *testing.T) {
	inputs := [][]byte{nil, {}, {1}, make([]byte, 31), make([]byte, 32), make([]byte, 56), make([]byte, 57), make([]byte, 64), make([]byte, 114), make([]byte, 1000)}
	for _, id := range ciphersuite.Supported() {
		s, _ := ciphersuite.Lookup(id)
		for _, a := range inputs {
			for _, b := range inputs {
				_, _ = s.Sign(a, b)
				_ = s.Verify(a, b, b)
				_, _ = s.SignWithLabel(a, "x", b)
				_ = s.VerifyWithLabel(a, "x", b, a)
				_, _, _ = s.EncryptWithLabel(a, "x", b, b)
				_, _ = s.DecryptWithLabel(a, "x", b, a, b)
				_, _, _ = s.HPKESeal(a, b, b, b)
				_, _ = s.HPKEOpen(a, b, b, a, b)
				_, _, _ = s.HPKEExport(a, b, b, 32)
				_, _ = s.HPKEExportOpen(a, b, a, b, 1<<20)
				_, _, _ = s.DeriveHPKEKeyPair(a)
				_, _ = s.HPKEPublicKey(a)
				_, _ = s.SignaturePublicKey(a)
				_, _ = s.Seal(a, b, b, b)
				_, _ = s.Open(a, b, b, a)
				_, _ = s.ExpandWithLabel(a, "x", b, -1)
				_, _ = s.Expand(a, b, 1<<30)
				_, _ = s.DeriveTreeSecret(a, "x", 1<<31, 70000)
				_ = s.Extract(a, b)
				_, _ = s.RefHash("x", a)
			}
		}
	}
}
