package ciphersuite_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
)

var errWrite = errors.New("content does not encode")

// VerifyAllWithLabel returns, for every check, the error class
// VerifyWithLabel returns for it — in Ed25519 suites above and below the
// batch threshold, and in an ECDSA suite: good signatures, signatures
// under another label, over other content, under another key, and keys
// of the wrong size; every third check's content written on demand
// (SignatureCheck.Write), and one whose writing fails gets that error.
func TestVerifyAllWithLabelMatchesVerifyWithLabel(t *testing.T) {
	for _, id := range []ciphersuite.ID{ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519, ciphersuite.MLS128P256AES128GCMSHA256P256} {
		s, err := ciphersuite.Lookup(id)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{5, 300} {
			var checks []ciphersuite.SignatureCheck
			var contents [][]byte
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
				contents = append(contents, c.Content)
				if i%3 == 0 {
					body := c.Content
					c.Content, c.Write = nil, func(w *codec.Writer) { w.Raw(body) }
				}
				checks = append(checks, c)
			}
			failing := checks[0]
			failing.Write = func(w *codec.Writer) { w.Fail(errWrite) }
			checks = append(checks, failing)
			got := s.VerifyAllWithLabel(checks)
			if !errors.Is(got[n], errWrite) {
				t.Fatalf("suite %#04x: a check whose content does not encode: %v", uint16(id), got[n])
			}
			checks = checks[:n]
			bad := 0
			for i, c := range checks {
				want := s.VerifyWithLabel(c.PublicKey, c.Label, contents[i], c.Signature)
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
