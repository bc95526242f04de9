package hpkewrap

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/hpke"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/wrappertest"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lowOrderPoints are X25519 public keys whose shared secret is all zeros,
// on which HPKE sender setup fails (JOIN-090).
func lowOrderPoints(t testing.TB) [][]byte {
	one := make([]byte, 32)
	one[0] = 1
	return [][]byte{
		make([]byte, 32),
		one,
		mustHex(t, "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800"),
	}
}

// TestContract runs the wrapper contract suite on CURVE25519, with the
// standard library's HPKE (framed by hand) as the reference.
func TestContract(t *testing.T) {
	wrappertest.Run(t, func(ctx context.Context, t *testing.T) (wrappertest.Harness, error) {
		return wrappertest.Static(NewCurve25519(), wrappertest.Caps{
			PublicKeySize:       32,
			PrivateKeySize:      32,
			HPKELayout:          true,
			EncapsulatedKeySize: 32,
			TagSize:             16,
			InvalidPublicKeys:   lowOrderPoints(t),
			Concurrent:          true,
			Reference:           stdlibReference{},
		}), nil
	})
}

// TestWelcomeInfo checks the companion definition of the info string: the
// TLS EncryptContext{label = "MLS 1.0 MLS_WELCOME", context = empty}.
func TestWelcomeInfo(t *testing.T) {
	got := EncryptContext("MLS 1.0 MLS_WELCOME", nil)
	if !bytes.Equal(got, ports.WelcomeWrapperInfo()) {
		t.Fatalf("EncryptContext = %x, ports.WelcomeWrapperInfo = %x", got, ports.WelcomeWrapperInfo())
	}
	if want := append(append([]byte{19}, "MLS 1.0 MLS_WELCOME"...), 0); !bytes.Equal(got, want) {
		t.Fatalf("EncryptContext = %x, want %x", got, want)
	}
}

// TestCiphertextFraming covers the opaque<V> prefix sizes and the decoder's
// rejections.
func TestCiphertextFraming(t *testing.T) {
	for _, n := range []int{0, 1, 63, 64, 16383, 16384, 70000} {
		enc, ct := bytes.Repeat([]byte{1}, n), bytes.Repeat([]byte{2}, n/2+1)
		b, err := MarshalCiphertext(enc, ct)
		if err != nil {
			t.Fatal(err)
		}
		e2, c2, err := ParseCiphertext(b)
		if err != nil || !bytes.Equal(e2, enc) || !bytes.Equal(c2, ct) {
			t.Fatalf("n=%d: round trip failed: %v", n, err)
		}
	}
	bad := []struct {
		why string
		in  string
	}{
		{"empty input", ""},
		{"reserved 0b11 prefix", "c0"},
		{"non-minimal 2-byte prefix", "4001aa00"},
		{"non-minimal 4-byte prefix", "80000001aa00"},
		{"kem_output past the end", "05aabb"},
		{"missing ciphertext", "01aa"},
		{"ciphertext past the end", "01aa03bb"},
		{"trailing bytes", "01aa01bbcc"},
		{"truncated 2-byte prefix", "40"},
		{"truncated 4-byte prefix", "8000"},
	}
	for _, c := range bad {
		if _, _, err := ParseCiphertext(mustHex(t, c.in)); !errors.Is(err, ports.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", c.why, err)
		}
	}
}

// TestJOIN090CheckPublicKey: a 32-byte CURVE25519 key passes, any other size
// or a low-order point fails sender setup and is rejected.
func TestJOIN090CheckPublicKey(t *testing.T) {
	ctx := context.Background()
	c := NewCurve25519()
	pub, _, err := c.GenerateKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckPublicKey(ctx, pub); err != nil {
		t.Fatalf("generated key rejected: %v", err)
	}
	for _, k := range append(lowOrderPoints(t), make([]byte, 31), make([]byte, 1216)) {
		if err := c.CheckPublicKey(ctx, k); !errors.Is(err, ports.ErrInvalidKey) {
			t.Errorf("key %x: %v, want ErrInvalidKey", k, err)
		}
	}
}

// stdlibReference is CURVE25519 written directly on crypto/hpke, used as the
// suite's reference implementation.
type stdlibReference struct{}

func (stdlibReference) ID() ports.WrapperAlgorithmID { return ports.WrapperCurve25519 }
func (stdlibReference) PublicKeySize() int           { return 32 }
func (stdlibReference) GenerateKey(context.Context) ([]byte, []byte, error) {
	k, err := ecdh.X25519().GenerateKey(nil)
	if err != nil {
		return nil, nil, err
	}
	return k.PublicKey().Bytes(), k.Bytes(), nil
}
func (stdlibReference) CheckPublicKey(context.Context, []byte) error { return nil }
func (stdlibReference) Seal(_ context.Context, pub, info []byte, pts ...[]byte) ([][]byte, error) {
	pk, err := hpke.DHKEM(ecdh.X25519()).NewPublicKey(pub)
	if err != nil {
		return nil, err
	}
	enc, s, err := hpke.NewSender(pk, hpke.HKDFSHA256(), hpke.ChaCha20Poly1305(), info)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(pts))
	for i, pt := range pts {
		if out[i], err = s.Seal(nil, pt); err != nil {
			return nil, err
		}
	}
	out[0] = append(append([]byte{32}, enc...), appendOpaque(nil, out[0])...)
	return out, nil
}
func (stdlibReference) Open(_ context.Context, priv, info []byte, sealed ...[]byte) ([][]byte, error) {
	sk, err := hpke.DHKEM(ecdh.X25519()).NewPrivateKey(priv)
	if err != nil {
		return nil, err
	}
	enc, ct, err := ParseCiphertext(sealed[0])
	if err != nil {
		return nil, err
	}
	r, err := hpke.NewRecipient(enc, sk, hpke.HKDFSHA256(), hpke.ChaCha20Poly1305(), info)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(sealed))
	for i := range sealed {
		c := ct
		if i > 0 {
			c = sealed[i]
		}
		if out[i], err = r.Open(nil, c); err != nil {
			return nil, err
		}
	}
	return out, nil
}
