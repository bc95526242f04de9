package commitlog

import (
	"crypto/cipher"
	"crypto/sha512"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"
)

func mustAEAD(t *testing.T, k Keys) cipher.AEAD {
	t.Helper()
	a, err := chacha20poly1305.New(k.EncryptionKey)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func sha512Sum(b []byte) []byte {
	s := sha512.Sum512(b)
	return s[:]
}
