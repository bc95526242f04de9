package secrettree_test

import (
	"bytes"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/secrettree"
)

// A clone is independent: keys used and erased in the clone stay usable
// in the original and the reverse, and both derive the same keys; the
// clone encodes as the original did when it was made.
func TestCloneIsIndependent(t *testing.T) {
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	orig, err := secrettree.New(s, bytes.Repeat([]byte{7}, 32), 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := orig.Next(3, secrettree.Application); err != nil {
		t.Fatal(err)
	}
	var key []byte // generation 2 of leaf 5, skipped over by opening 4
	if err := orig.Open(5, secrettree.Application, 4, func(secrettree.KeyNonce) error { return nil }); err != nil {
		t.Fatal(err)
	}
	want, _ := orig.Encode()
	c := orig.Clone()
	if got, _ := c.Encode(); !bytes.Equal(got, want) {
		t.Fatal("a clone encodes differently from its original")
	}
	if err := c.Open(5, secrettree.Application, 2, func(kn secrettree.KeyNonce) error { key = bytes.Clone(kn.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := orig.Open(5, secrettree.Application, 2, func(kn secrettree.KeyNonce) error {
		if !bytes.Equal(kn.Key, key) {
			t.Fatal("the original's skipped key changed when the clone used it")
		}
		return nil
	}); err != nil {
		t.Fatalf("a key the clone used is gone from the original: %v", err)
	}
	a, _ := orig.Next(1, secrettree.Handshake)
	b, _ := c.Next(1, secrettree.Handshake)
	if !bytes.Equal(a.Key, b.Key) || a.Generation != b.Generation {
		t.Fatal("clone and original derive different keys")
	}
}
