package pqwrap

import (
	"bytes"
	"context"
	"crypto/hpke"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cloudflare/circl/kem/xwing"

	"github.com/regroup-mls/regroup/adapters/hpkewrap"
	"github.com/regroup-mls/regroup/ports"
)

// hpkeVector is one entry of crypto/hpke's testdata/hpke-pq.json.
type hpkeVector struct {
	Mode           uint16 `json:"mode"`
	KEM            uint16 `json:"kem_id"`
	KDF            uint16 `json:"kdf_id"`
	AEAD           uint16 `json:"aead_id"`
	Info           string `json:"info"`
	IkmE           string `json:"ikmE"`
	SkRm           string `json:"skRm"`
	PkRm           string `json:"pkRm"`
	Enc            string `json:"enc"`
	SharedSecret   string `json:"shared_secret"`
	SuiteID        string `json:"suite_id"`
	Key            string `json:"key"`
	BaseNonce      string `json:"base_nonce"`
	ExporterSecret string `json:"exporter_secret"`
	Encryptions    []struct {
		Aad   string `json:"aad"`
		Ct    string `json:"ct"`
		Nonce string `json:"nonce"`
		Pt    string `json:"pt"`
	} `json:"encryptions"`
}

// loadVectors reads the Go installation's known-answer vectors for
// draft-ietf-hpke-pq. They ship with every Go source tree; a missing file
// skips locally and fails in CI.
func loadVectors(t *testing.T) []hpkeVector {
	t.Helper()
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	path := filepath.Join(strings.TrimSpace(string(goroot)), "src", "crypto", "hpke", "testdata", "hpke-pq.json")
	data, err := os.ReadFile(path)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("hpke-pq vectors not found at %s: %v", path, err)
		}
		t.Skipf("hpke-pq vectors not found at %s (install the Go source tree): %v", path, err)
	}
	var vs []hpkeVector
	if err := json.Unmarshal(data, &vs); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	return vs
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKnownAnswerCanonical reproduces every MLKEM768-X25519 (0x647A),
// HKDF-SHA256, ChaCha20-Poly1305 base-mode vector of crypto/hpke's testdata
// with this package's KEM and key schedule: public key from seed,
// encapsulation from ikmE, shared secret, suite id, key, base nonce,
// exporter secret and every encryption.
func TestKnownAnswerCanonical(t *testing.T) {
	var ran int
	for _, v := range loadVectors(t) {
		if v.Mode != 0 || v.KEM != KEMIDCanonical || v.KDF != kdfHKDFSHA256 || v.AEAD != aeadChaCha20Poly1305 {
			continue
		}
		ran++
		seed := unhex(t, v.SkRm)
		_, pk := xwing.DeriveKeyPairPacked(seed)
		if !bytes.Equal(pk, unhex(t, v.PkRm)) {
			t.Fatalf("public key from seed differs")
		}
		x := NewXWingCanonical()
		ss, enc, err := x.encapsulate(pk, unhex(t, v.IkmE))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(enc, unhex(t, v.Enc)) {
			t.Fatalf("enc differs")
		}
		if !bytes.Equal(ss, unhex(t, v.SharedSecret)) {
			t.Fatalf("shared secret differs")
		}
		if got := xwing.Decapsulate(enc, seed); !bytes.Equal(got, ss) {
			t.Fatalf("decapsulated shared secret differs")
		}
		if !bytes.Equal(suiteID(KEMIDCanonical), unhex(t, v.SuiteID)) {
			t.Fatalf("suite id %x, want %s", suiteID(KEMIDCanonical), v.SuiteID)
		}
		ks, err := newKeySchedule(KEMIDCanonical, ss, unhex(t, v.Info))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ks.key, unhex(t, v.Key)) || !bytes.Equal(ks.baseNonce, unhex(t, v.BaseNonce)) ||
			!bytes.Equal(ks.exporterSecret, unhex(t, v.ExporterSecret)) {
			t.Fatalf("key schedule differs: key %x nonce %x exp %x", ks.key, ks.baseNonce, ks.exporterSecret)
		}
		sender, _ := newContext(ks)
		recipient, _ := newContext(ks)
		for i, e := range v.Encryptions {
			if !bytes.Equal(sender.nonce(), unhex(t, e.Nonce)) {
				t.Fatalf("encryption %d: nonce differs", i)
			}
			ct := sender.seal(unhex(t, e.Aad), unhex(t, e.Pt))
			if !bytes.Equal(ct, unhex(t, e.Ct)) {
				t.Fatalf("encryption %d: ciphertext differs", i)
			}
			pt, err := recipient.open(unhex(t, e.Aad), ct)
			if err != nil || !bytes.Equal(pt, unhex(t, e.Pt)) {
				t.Fatalf("encryption %d: open: %v", i, err)
			}
		}
	}
	if ran == 0 {
		t.Fatal("no 0x647A/HKDF-SHA256/ChaCha20-Poly1305 vector in hpke-pq.json")
	}
}

// TestInteropCanonicalWithCryptoHPKE seals with NewXWingCanonical and opens
// with crypto/hpke's MLKEM768X25519, and the reverse, for a Welcome and its
// metadata under one context.
func TestInteropCanonicalWithCryptoHPKE(t *testing.T) {
	ctx := context.Background()
	x := NewXWingCanonical()
	info := ports.WelcomeWrapperInfo()
	kem := hpke.MLKEM768X25519()
	welcome, meta := []byte("mls welcome"), []byte("welcome metadata")

	t.Run("regroup seals, crypto/hpke opens", func(t *testing.T) {
		pub, seed, err := x.GenerateKey(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sealed, err := x.Seal(ctx, pub, info, welcome, meta)
		if err != nil {
			t.Fatal(err)
		}
		sk, err := kem.NewPrivateKey(seed)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(sk.PublicKey().Bytes(), pub) {
			t.Fatal("crypto/hpke derives another public key from the seed")
		}
		enc, ct, err := hpkewrap.ParseCiphertext(sealed[0])
		if err != nil {
			t.Fatal(err)
		}
		r, err := hpke.NewRecipient(enc, sk, hpke.HKDFSHA256(), hpke.ChaCha20Poly1305(), info)
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range [][]byte{welcome, meta} {
			c := ct
			if i > 0 {
				c = sealed[i]
			}
			got, err := r.Open(nil, c)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("payload %d: %q, %v", i, got, err)
			}
		}
	})

	t.Run("crypto/hpke seals, regroup opens", func(t *testing.T) {
		sk, err := kem.GenerateKey()
		if err != nil {
			t.Fatal(err)
		}
		seed, err := sk.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if len(seed) != PrivateKeySize {
			t.Fatalf("crypto/hpke private key is %d bytes", len(seed))
		}
		enc, s, err := hpke.NewSender(sk.PublicKey(), hpke.HKDFSHA256(), hpke.ChaCha20Poly1305(), info)
		if err != nil {
			t.Fatal(err)
		}
		c0, _ := s.Seal(nil, welcome)
		c1, _ := s.Seal(nil, meta)
		data, err := hpkewrap.MarshalCiphertext(enc, c0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := x.Open(ctx, seed, info, data, c1)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[0], welcome) || !bytes.Equal(got[1], meta) {
			t.Fatalf("opened %q", got)
		}
		// JOIN-076: the same message relabelled as the draft-06 algorithm
		// does not open: the KEM id is bound into the key schedule.
		if _, err := NewXWing().Open(ctx, seed, info, data, c1); !errors.Is(err, ports.ErrNotRecipient) {
			t.Fatalf("draft-06 open of a 0x647A message: %v, want ErrNotRecipient", err)
		}
	})
}

// TestSuiteIDs pins the two suite ids: the draft-06 wrapper differs from the
// canonical one only in the KEM id bytes.
func TestSuiteIDs(t *testing.T) {
	if got := suiteID(KEMIDDraft06); !bytes.Equal(got, []byte("HPKE\x00\x4d\x00\x01\x00\x03")) {
		t.Errorf("draft-06 suite id %x", got)
	}
	if got := suiteID(KEMIDCanonical); !bytes.Equal(got, []byte("HPKE\x64\x7a\x00\x01\x00\x03")) {
		t.Errorf("canonical suite id %x", got)
	}
}
