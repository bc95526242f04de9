package edkey

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// The eight points of the Ed25519 curve whose order divides 8, each in
// its canonical encoding: the identity, the point of order 2, the two of
// order 4 and the four of order 8. A signature under any of them verifies
// for some messages without any private key.
var smallOrder = []string{
	"0100000000000000000000000000000000000000000000000000000000000000", // order 1
	"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // order 2
	"0000000000000000000000000000000000000000000000000000000000000000", // order 4
	"0000000000000000000000000000000000000000000000000000000000000080", // order 4
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a", // order 8
	"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa", // order 8
	"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05", // order 8
	"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85", // order 8
}

func TestCOMP320_SmallOrderPointsRefused(t *testing.T) {
	for _, h := range smallOrder {
		b, _ := hex.DecodeString(h)
		err := Check(b)
		if !errors.Is(err, ErrWeakKey) || !strings.Contains(err.Error(), "small order") {
			t.Errorf("Check(%s) = %v, want a small-order refusal", h, err)
		}
	}
}

func TestCOMP320_NonCanonicalRefused(t *testing.T) {
	for _, h := range []string{
		// y = p (that is 0) and y = p+1 (that is 1): the same points as 00…00 and 01…00.
		"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		// x = 0 with the sign bit set.
		"0100000000000000000000000000000000000000000000000000000000000080",
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
	} {
		b, _ := hex.DecodeString(h)
		if err := Check(b); !errors.Is(err, ErrWeakKey) {
			t.Errorf("Check(%s) = %v, want a refusal", h, err)
		}
	}
}

func TestCOMP320_GeneratedKeysAccepted(t *testing.T) {
	for i := 0; i < 64; i++ {
		pub, _, _ := ed25519.GenerateKey(nil)
		if err := Check(pub); err != nil {
			t.Fatalf("Check(generated key %x) = %v", pub, err)
		}
	}
	if err := Check(make([]byte, 31)); !errors.Is(err, ErrWeakKey) {
		t.Fatalf("31 bytes: %v", err)
	}
}

func FuzzCheck(f *testing.F) {
	for _, h := range smallOrder {
		b, _ := hex.DecodeString(h)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if Check(b) == nil && len(b) != ed25519.PublicKeySize {
			t.Fatalf("accepted %d bytes", len(b))
		}
	})
}
