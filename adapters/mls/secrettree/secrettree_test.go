package secrettree_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/internal/vectors"
	"github.com/regroup-mls/regroup/adapters/mls/secrettree"
)

type leafGen struct {
	Generation     uint32      `json:"generation"`
	HandshakeKey   vectors.Hex `json:"handshake_key"`
	HandshakeNonce vectors.Hex `json:"handshake_nonce"`
	AppKey         vectors.Hex `json:"application_key"`
	AppNonce       vectors.Hex `json:"application_nonce"`
}

// TestSecretTreeVectors runs the leaf ratchets of every case of
// secret-tree.json (§9, §9.1) for the supported suites.
func TestSecretTreeVectors(t *testing.T) {
	var cases []struct {
		Suite            uint16      `json:"cipher_suite"`
		EncryptionSecret vectors.Hex `json:"encryption_secret"`
		Leaves           [][]leafGen `json:"leaves"`
	}
	vectors.Load(t, "secret-tree.json", &cases)
	for i, c := range cases {
		t.Run(fmt.Sprintf("secret-tree/%d", i), func(t *testing.T) {
			s, err := ciphersuite.Lookup(ciphersuite.ID(c.Suite))
			if err != nil {
				t.Skipf("suite %d not implemented by regroup: %v", c.Suite, err)
			}
			tree, err := secrettree.New(s, c.EncryptionSecret, uint32(len(c.Leaves)), nil)
			if err != nil {
				t.Fatal(err)
			}
			for leaf, gens := range c.Leaves {
				for _, g := range gens {
					check := func(typ secrettree.RatchetType, key, nonce []byte) {
						t.Helper()
						err := tree.Open(uint32(leaf), typ, g.Generation, func(kn secrettree.KeyNonce) error {
							if !bytes.Equal(kn.Key, key) || !bytes.Equal(kn.Nonce, nonce) {
								t.Errorf("leaf %d gen %d type %d: key %x nonce %x; want %x %x", leaf, g.Generation, typ, kn.Key, kn.Nonce, key, nonce)
							}
							return nil
						})
						if err != nil {
							t.Fatalf("leaf %d gen %d: %v", leaf, g.Generation, err)
						}
					}
					check(secrettree.Handshake, g.HandshakeKey, g.HandshakeNonce)
					check(secrettree.Application, g.AppKey, g.AppNonce)
				}
			}
		})
	}
}

func newTree(t *testing.T, opts *secrettree.Options) *secrettree.Tree {
	t.Helper()
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	tree, err := secrettree.New(s, make([]byte, 32), 4, opts)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

func open(tree *secrettree.Tree, leaf, gen uint32) error {
	return tree.Open(leaf, secrettree.Application, gen, func(secrettree.KeyNonce) error { return nil })
}

// TestForwardSecrecy (§9.2): a used key is erased and cannot be used again,
// a skipped key stays until used, and a generation past the window is a
// typed error.
func TestForwardSecrecy(t *testing.T) {
	tree := newTree(t, &secrettree.Options{MaxSkip: 10, MaxStored: 5})
	if err := open(tree, 1, 3); err != nil {
		t.Fatal(err)
	}
	if err := open(tree, 1, 3); !errors.Is(err, secrettree.ErrGenerationUsed) {
		t.Fatalf("reuse of generation 3: %v", err)
	}
	if err := open(tree, 1, 1); err != nil {
		t.Fatalf("skipped generation 1: %v", err)
	}
	if err := open(tree, 1, 15); !errors.Is(err, secrettree.ErrGenerationTooFar) {
		t.Fatalf("generation 15 with window 10: %v", err)
	}
	if err := open(tree, 1, 14); err != nil {
		t.Fatalf("generation 14: %v", err)
	}
	// 0 and 2 were skipped but dropped: only 5 keys are kept (10..14).
	if err := open(tree, 1, 0); !errors.Is(err, secrettree.ErrGenerationUsed) {
		t.Fatalf("dropped generation 0: %v", err)
	}
	if err := open(tree, 1, 10); err != nil {
		t.Fatalf("stored generation 10: %v", err)
	}
	if err := open(tree, 4, 0); !errors.Is(err, secrettree.ErrLeafOutOfRange) {
		t.Fatalf("leaf 4 of 4: %v", err)
	}
}

// TestFailedUseKeepsKey: a key whose use fails (a forged message) stays
// available for the genuine one.
func TestFailedUseKeepsKey(t *testing.T) {
	tree := newTree(t, nil)
	boom := errors.New("forged")
	if err := tree.Open(0, secrettree.Handshake, 2, func(secrettree.KeyNonce) error { return boom }); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if err := tree.Open(0, secrettree.Handshake, 2, func(secrettree.KeyNonce) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// TestNextMatchesOpen: the sender's keys are the receiver's keys.
func TestNextMatchesOpen(t *testing.T) {
	a, b := newTree(t, nil), newTree(t, nil)
	for g := range uint32(3) {
		kn, err := a.Next(2, secrettree.Application)
		if err != nil || kn.Generation != g {
			t.Fatalf("next: %v %v", kn.Generation, err)
		}
		want := append([]byte(nil), kn.Key...)
		err = b.Open(2, secrettree.Application, g, func(got secrettree.KeyNonce) error {
			if !bytes.Equal(got.Key, want) {
				t.Errorf("gen %d key differs", g)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkRatchet measures one step of a leaf's hash ratchet (three
// DeriveTreeSecret calls) next to one DeriveTreeSecret as the reference.
func BenchmarkRatchet(b *testing.B) {
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	b.Run("ratchet-step", func(b *testing.B) {
		tree, _ := secrettree.New(s, make([]byte, 32), 2, &secrettree.Options{})
		for b.Loop() {
			if _, err := tree.Next(0, secrettree.Application); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reference-derive-tree-secret", func(b *testing.B) {
		sec := make([]byte, 32)
		for b.Loop() {
			if _, err := s.DeriveTreeSecret(sec, "key", 7, 32); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestEncodeDecode: a tree restored from its encoding hands out the same
// keys and still refuses used ones.
func TestEncodeDecode(t *testing.T) {
	a := newTree(t, &secrettree.Options{MaxSkip: 50, MaxStored: 20})
	b := newTree(t, nil)
	if err := open(a, 1, 5); err != nil { // skips 0..4
		t.Fatal(err)
	}
	enc, err := a.Encode()
	if err != nil {
		t.Fatal(err)
	}
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	c, err := secrettree.Decode(s, enc)
	if err != nil {
		t.Fatal(err)
	}
	if err := open(c, 1, 5); !errors.Is(err, secrettree.ErrGenerationUsed) {
		t.Fatalf("used key after restore: %v", err)
	}
	for _, g := range []uint32{2, 7} {
		var got, want []byte
		_ = c.Open(1, secrettree.Application, g, func(kn secrettree.KeyNonce) error { got = append([]byte(nil), kn.Key...); return nil })
		_ = b.Open(1, secrettree.Application, g, func(kn secrettree.KeyNonce) error { want = append([]byte(nil), kn.Key...); return nil })
		if got == nil || !bytes.Equal(got, want) {
			t.Fatalf("generation %d after restore differs", g)
		}
	}
	if _, err := secrettree.Decode(s, enc[:len(enc)-1]); err == nil {
		t.Fatal("truncated state decoded")
	}
}
