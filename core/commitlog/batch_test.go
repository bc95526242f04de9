package commitlog

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha512"
	"fmt"
	"math/big"
	"testing"

	"github.com/oasisprotocol/curve25519-voi/curve"
	"github.com/oasisprotocol/curve25519-voi/curve/scalar"
)

// hostile builds Ed25519 signatures by hand so that their points carry
// chosen small-order components.
type hostile struct {
	t     *testing.T
	torsn curve.EdwardsPoint // a point of order 8
}

func newHostile(t *testing.T) *hostile {
	h := &hostile{t: t}
	for {
		var b [32]byte
		_, _ = rand.Read(b[:])
		c, err := curve.NewCompressedEdwardsYFromBytes(b[:])
		if err != nil {
			continue
		}
		var p curve.EdwardsPoint
		if _, err := p.SetCompressedY(c); err != nil {
			continue
		}
		h.torsn.Mul(&p, scalar.BASEPOINT_ORDER)
		var four curve.EdwardsPoint
		four.Add(&h.torsn, &h.torsn)
		four.Add(&four, &four)
		if !four.IsIdentity() { // order exactly 8
			return h
		}
	}
}

func randScalar() *scalar.Scalar {
	var b [64]byte
	_, _ = rand.Read(b[:])
	s, _ := scalar.New().SetBytesModOrderWide(b[:])
	return s
}

func encode(p *curve.EdwardsPoint) []byte {
	var c curve.CompressedEdwardsY
	c.SetEdwardsPoint(p)
	return c[:]
}

// sign makes a pure Ed25519 signature with secret scalar a, where the
// public key is [a]B + tA·T and R is [r]B + tR·T.
func (h *hostile) sign(msg []byte, tA, tR int) (pub, sig []byte) {
	a, r := randScalar(), randScalar()
	var A, R, tmp curve.EdwardsPoint
	A.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, a)
	R.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, r)
	for i := 0; i < tA; i++ {
		A.Add(&A, &h.torsn)
	}
	for i := 0; i < tR; i++ {
		R.Add(&R, &h.torsn)
	}
	_ = tmp
	pub, rb := encode(&A), encode(&R)
	d := sha512.New()
	d.Write(rb)
	d.Write(pub)
	d.Write(msg)
	k, _ := scalar.New().SetBytesModOrderWide(d.Sum(nil))
	var s scalar.Scalar
	s.Mul(k, a)
	s.Add(&s, r)
	sb := make([]byte, 32)
	_ = s.ToBytes(sb)
	return pub, append(rb, sb...)
}

// nonCanonicalS returns sig with S replaced by S + L (still 32 bytes).
func nonCanonicalS(sig []byte) []byte {
	le := func(b []byte) *big.Int {
		r := make([]byte, len(b))
		for i := range b {
			r[len(b)-1-i] = b[i]
		}
		return new(big.Int).SetBytes(r)
	}
	L, _ := new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)
	s := new(big.Int).Add(le(sig[32:]), L)
	be := s.FillBytes(make([]byte, 32))
	out := append([]byte{}, sig[:32]...)
	for i := 31; i >= 0; i-- {
		out = append(out, be[i])
	}
	return out
}

// The batch path accepts exactly what crypto/ed25519 accepts: hostile
// signatures (non-canonical S, small-order and mixed-order keys, R with a
// torsion component, the identity key) mixed into batches of honest ones
// get crypto/ed25519's answer, whether the batch as a whole passes or not.
func TestBatchVerifierMatchesSingleVerification(t *testing.T) {
	h := newHostile(t)
	var checks []SignatureCheck
	add := func(name string, pub, msg, sig []byte) {
		checks = append(checks, SignatureCheck{PublicKey: pub, Message: msg, Signature: sig, Options: &ed25519.Options{}})
		_ = name
	}
	honestPub, honestPriv, _ := ed25519.GenerateKey(nil)
	for i := 0; i < 40; i++ {
		msg := []byte(fmt.Sprintf("message %d", i))
		add("honest", honestPub, msg, ed25519.Sign(honestPriv, msg))
		switch i % 5 {
		case 0: // mixed-order key: cofactored accepts, cofactorless only when 8 | k
			pub, sig := h.sign(msg, 1+i%7, 0)
			add("mixed-order A", pub, msg, sig)
		case 1: // R with a torsion component: cofactored accepts, cofactorless never
			pub, sig := h.sign(msg, 0, 1+i%7)
			add("torsion R", pub, msg, sig)
		case 2: // non-canonical S
			add("non-canonical S", honestPub, msg, nonCanonicalS(ed25519.Sign(honestPriv, msg)))
		case 3: // identity key, identity R, S = 0: accepted by crypto/ed25519
			id := make([]byte, 32)
			id[0] = 1
			add("identity A", id, msg, append(append([]byte{}, id...), make([]byte, 32)...))
		case 4: // small-order A (the order-8 point) with R = A, S = 0
			t8 := encode(&h.torsn)
			add("small-order A", t8, msg, append(append([]byte{}, t8...), make([]byte, 32)...))
		}
	}
	want := SingleVerifier{}.VerifyAll(checks)
	accepted := 0
	for _, w := range want {
		if w {
			accepted++
		}
	}
	if accepted == len(checks) || accepted == 0 {
		t.Fatalf("test data does not mix valid and invalid signatures (%d of %d valid)", accepted, len(checks))
	}
	bv := NewBatchVerifier()
	for _, batch := range [][]SignatureCheck{checks, checks[:1], checks[:2], checks[1:2], checks[3:4]} {
		got := bv.VerifyAll(batch)
		ref := SingleVerifier{}.VerifyAll(batch)
		for i := range batch {
			if got[i] != ref[i] {
				t.Fatalf("check %d: batch %v, crypto/ed25519 %v", i, got[i], ref[i])
			}
		}
	}
	// Each hostile signature alone beside honest ones: the batch equation
	// (cofactored) would pass for the torsion cases; the answer must not.
	for i := range checks {
		batch := []SignatureCheck{checks[0], checks[i], checks[2*(i%2)]}
		got := bv.VerifyAll(batch)
		if got[1] != want[i] {
			t.Fatalf("check %d alone: batch %v, crypto/ed25519 %v", i, got[1], want[i])
		}
	}
	// A batch of only valid signatures passes in one go.
	var honest []SignatureCheck
	for i, w := range want {
		if w {
			honest = append(honest, checks[i])
		}
	}
	for i, ok := range bv.VerifyAll(honest) {
		if !ok {
			t.Fatalf("valid signature %d rejected", i)
		}
	}
}

// A batch larger than the subset-sum threshold with torsion-carrying R and
// mixed-order keys among honest signatures gets crypto/ed25519's answers.
func TestBatchVerifierLargeBatchMatchesSingle(t *testing.T) {
	h := newHostile(t)
	pub, priv, _ := ed25519.GenerateKey(nil)
	var checks []SignatureCheck
	for i := 0; i < 300; i++ {
		msg := []byte(fmt.Sprintf("m%d", i))
		sig := ed25519.Sign(priv, msg)
		k := pub
		switch i {
		case 17, 18:
			k, sig = h.sign(msg, 0, 4) // R with an order-2 component, twice: they cancel in half of all subset sums
		case 40:
			k, sig = h.sign(msg, 3, 0)
		}
		checks = append(checks, SignatureCheck{PublicKey: k, Message: msg, Signature: sig, Options: &ed25519.Options{}})
	}
	want := SingleVerifier{}.VerifyAll(checks)
	got := NewBatchVerifier().VerifyAll(checks)
	for i := range checks {
		if got[i] != want[i] {
			t.Fatalf("check %d: batch %v, crypto/ed25519 %v", i, got[i], want[i])
		}
	}
	if want[17] || want[18] {
		t.Fatal("torsion-R signatures should be invalid under crypto/ed25519")
	}
}
