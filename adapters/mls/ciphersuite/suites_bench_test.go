package ciphersuite_test

import (
	"fmt"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
)

// BenchmarkSuites times, per suite, what a member does most on a commit:
// derive a node key pair, HPKE-seal a path secret to a key and open it,
// and sign and verify a FramedContentTBS-sized message. Suite 3 (regroup's
// own) is the reference the others compare with in the same run.
func BenchmarkSuites(b *testing.B) {
	ikmMsg := make([]byte, 64)
	msg := make([]byte, 256)
	for _, id := range ciphersuite.Supported() {
		s, _ := ciphersuite.Lookup(id)
		priv, pub, err := s.DeriveHPKEKeyPair(ikmMsg)
		if err != nil {
			b.Fatal(err)
		}
		sigPriv, sigPub, err := s.GenerateSignatureKey()
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("suite%d/derive-seal-open", id), func(b *testing.B) {
			for b.Loop() {
				if _, _, err := s.DeriveHPKEKeyPair(ikmMsg); err != nil {
					b.Fatal(err)
				}
				kem, ct, err := s.EncryptWithLabel(pub, "UpdatePathNode", msg[:32], msg[:32])
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.DecryptWithLabel(priv, "UpdatePathNode", msg[:32], kem, ct); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("suite%d/sign-verify", id), func(b *testing.B) {
			for b.Loop() {
				sig, err := s.SignWithLabel(sigPriv, "FramedContentTBS", msg)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.VerifyWithLabel(sigPub, "FramedContentTBS", msg, sig); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
