package ciphersuite_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
)

// VerifyAllWithLabel returns, for every check, the error class
// VerifyWithLabel returns for it — in Ed25519 suites above and below the
// batch threshold, and in an ECDSA suite: good signatures, signatures
// under another label, over other content, under another key, and keys
// of the wrong size.
func TestVerifyAllWithLabelMatchesVerifyWithLabel(t *testing.T) {
	for _, id := range []ciphersuite.ID{ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519, ciphersuite.MLS128P256AES128GCMSHA256P256} {
		s, err := ciphersuite.Lookup(id)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{5, 300} {
			var checks []ciphersuite.SignatureCheck
			for i := range n {
				priv, pub, _ := s.GenerateSignatureKey()
				content := fmt.Appendf(nil, "content %d", i)
				sig, err := s.SignWithLabel(priv, "LeafNodeTBS", content)
				if err != nil {
					t.Fatal(err)
				}
				c := ciphersuite.SignatureCheck{PublicKey: pub, Label: "LeafNodeTBS", Content: content, Signature: sig}
				switch i % 10 {
				case 1:
					c.Label = "KeyPackageTBS"
				case 2:
					c.Content = []byte("other content")
				case 3:
					_, c.PublicKey, _ = s.GenerateSignatureKey()
				case 4:
					c.PublicKey = c.PublicKey[:len(c.PublicKey)-1]
				}
				checks = append(checks, c)
			}
			got := s.VerifyAllWithLabel(checks)
			bad := 0
			for i, c := range checks {
				want := s.VerifyWithLabel(c.PublicKey, c.Label, c.Content, c.Signature)
				for _, class := range []error{ciphersuite.ErrBadSignature, ciphersuite.ErrInvalidKey} {
					if errors.Is(got[i], class) != errors.Is(want, class) {
						t.Fatalf("suite %#04x, %d checks, check %d: VerifyAllWithLabel %v, VerifyWithLabel %v", uint16(id), n, i, got[i], want)
					}
				}
				if (got[i] == nil) != (want == nil) {
					t.Fatalf("suite %#04x, %d checks, check %d: VerifyAllWithLabel %v, VerifyWithLabel %v", uint16(id), n, i, got[i], want)
				}
				if want != nil {
					bad++
				}
			}
			if bad == 0 || bad == n {
				t.Fatalf("suite %#04x: %d of %d checks fail", uint16(id), bad, n)
			}
		}
	}
}
