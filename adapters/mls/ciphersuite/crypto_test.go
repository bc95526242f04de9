package ciphersuite_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/internal/vectors"
)

type cryptoBasics struct {
	Suite   uint16 `json:"cipher_suite"`
	RefHash struct {
		Label string      `json:"label"`
		Value vectors.Hex `json:"value"`
		Out   vectors.Hex `json:"out"`
	} `json:"ref_hash"`
	ExpandWithLabel struct {
		Secret  vectors.Hex `json:"secret"`
		Label   string      `json:"label"`
		Context vectors.Hex `json:"context"`
		Length  int         `json:"length"`
		Out     vectors.Hex `json:"out"`
	} `json:"expand_with_label"`
	DeriveSecret struct {
		Secret vectors.Hex `json:"secret"`
		Label  string      `json:"label"`
		Out    vectors.Hex `json:"out"`
	} `json:"derive_secret"`
	DeriveTreeSecret struct {
		Secret     vectors.Hex `json:"secret"`
		Label      string      `json:"label"`
		Generation uint32      `json:"generation"`
		Length     int         `json:"length"`
		Out        vectors.Hex `json:"out"`
	} `json:"derive_tree_secret"`
	SignWithLabel struct {
		Priv      vectors.Hex `json:"priv"`
		Pub       vectors.Hex `json:"pub"`
		Content   vectors.Hex `json:"content"`
		Label     string      `json:"label"`
		Signature vectors.Hex `json:"signature"`
	} `json:"sign_with_label"`
	EncryptWithLabel struct {
		Priv       vectors.Hex `json:"priv"`
		Pub        vectors.Hex `json:"pub"`
		Label      string      `json:"label"`
		Context    vectors.Hex `json:"context"`
		Plaintext  vectors.Hex `json:"plaintext"`
		KEMOutput  vectors.Hex `json:"kem_output"`
		Ciphertext vectors.Hex `json:"ciphertext"`
	} `json:"encrypt_with_label"`
}

// TestCryptoBasicsVectors runs every case of crypto-basics.json (§5.1–5.2,
// §8, §9) for the supported suites.
func TestCryptoBasicsVectors(t *testing.T) {
	var cases []cryptoBasics
	vectors.Load(t, "crypto-basics.json", &cases)
	for i, c := range cases {
		t.Run(fmt.Sprintf("crypto-basics/%d", i), func(t *testing.T) {
			s, err := ciphersuite.Lookup(ciphersuite.ID(c.Suite))
			if err != nil {
				t.Skipf("suite %d not implemented by regroup: %v", c.Suite, err)
			}
			check := func(name string, got []byte, err error, want []byte) {
				t.Helper()
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("%s = %x, %v; want %x", name, got, err, want)
				}
			}
			rh, err := s.RefHash(c.RefHash.Label, c.RefHash.Value)
			check("RefHash", rh, err, c.RefHash.Out)
			e := c.ExpandWithLabel
			out, err := s.ExpandWithLabel(e.Secret, e.Label, e.Context, e.Length)
			check("ExpandWithLabel", out, err, e.Out)
			out, err = s.DeriveSecret(c.DeriveSecret.Secret, c.DeriveSecret.Label)
			check("DeriveSecret", out, err, c.DeriveSecret.Out)
			d := c.DeriveTreeSecret
			out, err = s.DeriveTreeSecret(d.Secret, d.Label, d.Generation, d.Length)
			check("DeriveTreeSecret", out, err, d.Out)

			sg := c.SignWithLabel
			if err := s.VerifyWithLabel(sg.Pub, sg.Label, sg.Content, sg.Signature); err != nil {
				t.Errorf("VerifyWithLabel: %v", err)
			}
			sig, err := s.SignWithLabel(sg.Priv, sg.Label, sg.Content)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.VerifyWithLabel(sg.Pub, sg.Label, sg.Content, sig); err != nil {
				t.Errorf("verify own signature: %v", err)
			}
			if err := s.VerifyWithLabel(sg.Pub, sg.Label+"x", sg.Content, sg.Signature); !errors.Is(err, ciphersuite.ErrBadSignature) {
				t.Errorf("wrong label verified: %v", err)
			}

			en := c.EncryptWithLabel
			pt, err := s.DecryptWithLabel(en.Priv, en.Label, en.Context, en.KEMOutput, en.Ciphertext)
			check("DecryptWithLabel", pt, err, en.Plaintext)
			kem, ct, err := s.EncryptWithLabel(en.Pub, en.Label, en.Context, en.Plaintext)
			if err != nil {
				t.Fatal(err)
			}
			pt, err = s.DecryptWithLabel(en.Priv, en.Label, en.Context, kem, ct)
			check("round trip", pt, err, en.Plaintext)
			if _, err := s.DecryptWithLabel(en.Priv, en.Label, []byte("other"), kem, ct); !errors.Is(err, ciphersuite.ErrDecrypt) {
				t.Errorf("wrong context decrypted: %v", err)
			}
		})
	}
}

// TestBadKeysAreErrors: malformed keys and lengths give typed errors.
func TestBadKeysAreErrors(t *testing.T) {
	s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
	if _, err := s.Sign([]byte{1, 2}, nil); !errors.Is(err, ciphersuite.ErrInvalidKey) {
		t.Errorf("short signing key: %v", err)
	}
	if err := s.Verify([]byte{1}, nil, nil); !errors.Is(err, ciphersuite.ErrInvalidKey) {
		t.Errorf("short verify key: %v", err)
	}
	if _, _, err := s.HPKESeal([]byte{1}, nil, nil, nil); !errors.Is(err, ciphersuite.ErrInvalidKey) {
		t.Errorf("short hpke key: %v", err)
	}
	if _, err := s.HPKEOpen(make([]byte, 32), nil, nil, []byte{1}, nil); err == nil {
		t.Errorf("short kem output accepted")
	}
	if _, err := s.Seal([]byte{1}, nil, nil, nil); !errors.Is(err, ciphersuite.ErrInvalidKey) {
		t.Errorf("short aead key: %v", err)
	}
	if _, err := s.ExpandWithLabel(nil, "x", nil, 1<<20); !errors.Is(err, ciphersuite.ErrInvalidLength) {
		t.Errorf("huge expand: %v", err)
	}
	if _, err := ciphersuite.Lookup(0x0008); !errors.Is(err, ciphersuite.ErrUnsupportedSuite) {
		t.Errorf("suite 8: %v", err)
	}
}
