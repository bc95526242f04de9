package ciphersuite_test

import (
	"bytes"
	"errors"
	"runtime"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
)

// DecryptWithLabel (§5.1.3) opens what EncryptWithLabel seals and what
// HPKEOpen opens with the EncryptContext encoded, in every suite, for
// contexts up to the size of a large group's encrypted GroupInfo; another
// context, a damaged ciphertext or KEM output fail with ErrDecrypt, a
// private key of the wrong size with ErrInvalidKey.
func TestDecryptWithLabelMatchesHPKEOpen(t *testing.T) {
	for _, id := range ciphersuite.Supported() {
		s, err := ciphersuite.Lookup(id)
		if err != nil {
			t.Fatal(err)
		}
		priv, pub, err := s.GenerateHPKEKey()
		if err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{0, 63, 64, 16384, 300_000} {
			context := bytes.Repeat([]byte{byte(size)}, size)
			kem, ct, err := s.EncryptWithLabel(pub, "Welcome", context, []byte("group secrets"))
			if err != nil {
				t.Fatal(err)
			}
			pt, err := s.DecryptWithLabel(priv, "Welcome", context, kem, ct)
			if err != nil || string(pt) != "group secrets" {
				t.Fatalf("suite %#04x, context of %d bytes: %q, %v", uint16(id), size, pt, err)
			}
			w := codec.NewWriter(size + 32)
			w.Opaque([]byte("MLS 1.0 Welcome"))
			w.Opaque(context)
			info, _ := w.Bytes()
			if ref, err := s.HPKEOpen(priv, info, nil, kem, ct); err != nil || !bytes.Equal(ref, pt) {
				t.Fatalf("suite %#04x: HPKEOpen %q, %v", uint16(id), ref, err)
			}
			other := append(append([]byte{}, context...), 1)
			if _, err := s.DecryptWithLabel(priv, "Welcome", other, kem, ct); !errors.Is(err, ciphersuite.ErrDecrypt) {
				t.Fatalf("suite %#04x: another context: %v", uint16(id), err)
			}
			if _, err := s.DecryptWithLabel(priv, "Other", context, kem, ct); !errors.Is(err, ciphersuite.ErrDecrypt) {
				t.Fatalf("suite %#04x: another label: %v", uint16(id), err)
			}
			bad := append([]byte{}, ct...)
			bad[0] ^= 1
			if _, err := s.DecryptWithLabel(priv, "Welcome", context, kem, bad); !errors.Is(err, ciphersuite.ErrDecrypt) {
				t.Fatalf("suite %#04x: damaged ciphertext: %v", uint16(id), err)
			}
			if _, err := s.DecryptWithLabel(priv, "Welcome", context, kem[:len(kem)-1], ct); !errors.Is(err, ciphersuite.ErrDecrypt) {
				t.Fatalf("suite %#04x: short KEM output: %v", uint16(id), err)
			}
		}
		if _, err := s.DecryptWithLabel(append(priv, 0, 0), "Welcome", nil, nil, nil); !errors.Is(err, ciphersuite.ErrInvalidKey) {
			t.Fatalf("suite %#04x: private key of the wrong size: %v", uint16(id), err)
		}
	}
}

// Opening a Welcome's GroupSecrets does not copy its context (the
// encrypted GroupInfo) in the suites of crypto/hpke: a 4 MB context costs
// far less than 4 MB of allocations.
func TestDecryptWithLabelDoesNotCopyTheContext(t *testing.T) {
	s, err := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	priv, pub, _ := s.GenerateHPKEKey()
	context := make([]byte, 4<<20)
	kem, ct, err := s.EncryptWithLabel(pub, "Welcome", context, []byte("secrets"))
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = s.DecryptWithLabel(priv, "Welcome", context, kem, ct)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Fatalf("opening allocated %d bytes for a context of %d", n, len(context))
	}
}
