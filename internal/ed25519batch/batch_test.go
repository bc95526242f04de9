package ed25519batch

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha512"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/oasisprotocol/curve25519-voi/curve"
	"github.com/oasisprotocol/curve25519-voi/curve/scalar"

	"github.com/regroup-mls/regroup/internal/edkey"
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

// digest is the challenge k of a signature with R encoded rb under key
// pub of msg, with dom2(0, ctx) first when ctx is not empty: computed here
// from RFC 8032, not by the code under test.
func digest(ctx string, rb, pub, msg []byte) *scalar.Scalar {
	d := sha512.New()
	if ctx != "" {
		d.Write([]byte("SigEd25519 no Ed25519 collisions"))
		d.Write([]byte{0, byte(len(ctx))})
		d.Write([]byte(ctx))
	}
	d.Write(rb)
	d.Write(pub)
	d.Write(msg)
	k, _ := scalar.New().SetBytesModOrderWide(d.Sum(nil))
	return k
}

// signHonest signs msg with crypto/ed25519: pure Ed25519 when ctx is
// empty, Ed25519ctx with ctx otherwise.
func signHonest(t testing.TB, priv ed25519.PrivateKey, ctx string, msg []byte) []byte {
	if ctx == "" {
		return ed25519.Sign(priv, msg)
	}
	sig, err := priv.Sign(nil, msg, &ed25519.Options{Context: ctx})
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

// sign makes an Ed25519 signature (Ed25519ctx when ctx is not empty) with
// secret scalar a, where the public key is [a]B + tA·T and R is
// [r]B + tR·T.
func (h *hostile) sign(ctx string, msg []byte, tA, tR int) (pub, sig []byte) {
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
	k := digest(ctx, rb, pub, msg)
	var s scalar.Scalar
	s.Mul(k, a)
	s.Add(&s, r)
	sb := make([]byte, 32)
	_ = s.ToBytes(sb)
	return pub, append(rb, sb...)
}

// signCancelling makes a signature under the mixed-order key [a]B + tA·T
// (tA odd) whose R = [r]B + tR·T carries the torsion that cancels k·tA·T:
// tR ≡ −k·tA (mod 8), so [S]B − [k]A = R exactly and crypto/ed25519
// accepts it, although neither A nor R is torsion-free.
func (h *hostile) signCancelling(ctx string, msg []byte, tA int) (pub, sig []byte) {
	a := randScalar()
	var A curve.EdwardsPoint
	A.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, a)
	for i := 0; i < tA; i++ {
		A.Add(&A, &h.torsn)
	}
	pub = encode(&A)
	for {
		r := randScalar()
		var R curve.EdwardsPoint
		R.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, r)
		for tR := 0; tR < 8; tR++ {
			rb := encode(&R)
			k := digest(ctx, rb, pub, msg)
			var kb [32]byte
			_ = k.ToBytes(kb[:])
			if (int(kb[0]%8)*tA+tR)%8 == 0 && tR != 0 {
				var s scalar.Scalar
				s.Mul(k, a)
				s.Add(&s, r)
				sb := make([]byte, 32)
				_ = s.ToBytes(sb)
				return pub, append(rb, sb...)
			}
			R.Add(&R, &h.torsn)
		}
	}
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

// single is crypto/ed25519's answer for every check.
func single(checks []Check) []bool {
	out := make([]bool, len(checks))
	for i := range checks {
		out[i] = messages{checks: checks}.verifyOne(i)
	}
	return out
}

// hostileChecks mixes honest signatures with hostile ones: mixed-order
// keys, R with a torsion component, non-canonical S, the identity key and
// a small-order key, and wrong lengths; every check in context ctx (pure
// Ed25519 when empty).
func hostileChecks(t *testing.T, n int, ctx string) []Check {
	h := newHostile(t)
	var checks []Check
	honestPub, honestPriv, _ := ed25519.GenerateKey(nil)
	for i := 0; i < n; i++ {
		msg := []byte(fmt.Sprintf("message %d", i))
		checks = append(checks, Check{honestPub, msg, signHonest(t, honestPriv, ctx, msg), ctx, false})
		var c Check
		switch i % 8 {
		case 0: // mixed-order key: cofactored accepts, cofactorless only when 8 | k
			pub, sig := h.sign(ctx, msg, 1+i%7, 0)
			c = Check{pub, msg, sig, ctx, false}
		case 1: // R with a torsion component: cofactored accepts, cofactorless never
			pub, sig := h.sign(ctx, msg, 0, 1+i%7)
			c = Check{pub, msg, sig, ctx, false}
		case 2: // non-canonical S
			c = Check{honestPub, msg, nonCanonicalS(signHonest(t, honestPriv, ctx, msg)), ctx, false}
		case 3: // identity key, identity R, S = 0: accepted by crypto/ed25519
			id := make([]byte, 32)
			id[0] = 1
			c = Check{id, msg, append(append([]byte{}, id...), make([]byte, 32)...), ctx, false}
		case 4: // small-order A (the order-8 point) with R = A, S = 0
			t8 := encode(&h.torsn)
			c = Check{t8, msg, append(append([]byte{}, t8...), make([]byte, 32)...), ctx, false}
		case 5: // wrong lengths
			c = Check{honestPub[:31], msg, signHonest(t, honestPriv, ctx, msg)[:63], ctx, false}
		case 6: // a valid signature over another message
			c = Check{honestPub, msg, signHonest(t, honestPriv, ctx, []byte("other")), ctx, false}
		case 7: // mixed-order key and R whose torsion cancels: crypto/ed25519 accepts
			pub, sig := h.signCancelling(ctx, msg, 1+2*(i%4))
			c = Check{pub, msg, sig, ctx, false}
		}
		checks = append(checks, c)
	}
	return checks
}

// honestPool returns n valid signatures under one key, in context ctx.
func honestPool(t testing.TB, n int, ctx string) []Check {
	pub, priv, _ := ed25519.GenerateKey(nil)
	out := make([]Check, n)
	for i := range out {
		m := []byte(fmt.Sprintf("honest %d", i))
		out[i] = Check{pub, m, signHonest(t, priv, ctx, m), ctx, false}
	}
	return out
}

// contexts are the contexts every test runs under: pure Ed25519, and
// Ed25519ctx with the context of regroup's identity updates.
var contexts = []string{"", "regroup identity update v1"}

// Verify accepts exactly what crypto/ed25519 accepts (COMP-097): hostile
// signatures mixed into sets of honest ones get crypto/ed25519's answer,
// whether a batch as a whole passes or not, below MinBatch (verified one
// by one over the cores) and above it (batched), each hostile kind alone
// among honest signatures and all together.
func TestVerifyMatchesSingleVerification(t *testing.T) {
	// Each kind of hostile check five times without a context, twice in
	// one (the test is the slowest of the package).
	for i, ctx := range contexts {
		t.Run(fmt.Sprintf("context=%q", ctx), func(t *testing.T) { verifyMatchesSingle(t, ctx, []int{40, 16}[i]) })
	}
}

func verifyMatchesSingle(t *testing.T, ctx string, n int) {
	checks := hostileChecks(t, n, ctx)
	want := single(checks)
	accepted := 0
	for _, w := range want {
		if w {
			accepted++
		}
	}
	if accepted == len(checks) || accepted == 0 {
		t.Fatalf("test data does not mix valid and invalid signatures (%d of %d valid)", accepted, len(checks))
	}
	if !want[2*7+1] {
		t.Fatal("crypto/ed25519 should accept a signature whose torsion components cancel")
	}
	pool := honestPool(t, MinBatch, ctx)
	all := append(append([]Check{}, pool...), checks...)
	for _, batch := range [][]Check{all, checks, checks[:MinShare+1], checks[1:2], checks[3:4]} {
		got, ref := Verify(batch), single(batch)
		for i := range batch {
			if got[i] != ref[i] {
				t.Fatalf("set of %d, check %d: Verify %v, crypto/ed25519 %v", len(batch), i, got[i], ref[i])
			}
		}
	}
	// Each hostile signature alone among honest signatures, in a set large
	// enough to be batched: the cofactored equation would pass the
	// torsion cases; the answer must not.
	for i := 1; i < len(checks); i += 2 {
		batch := append(append([]Check{}, pool...), checks[i])
		if got := Verify(batch); got[MinBatch] != want[i] {
			t.Fatalf("hostile check %d among honest ones: Verify %v, crypto/ed25519 %v", i, got[MinBatch], want[i])
		}
	}
	for i, ok := range Verify(pool) {
		if !ok {
			t.Fatalf("valid signature %d rejected", i)
		}
	}
}

// torsionFreeAll detects a single point with a small-order component of
// any order (2, 4 or 8) among many torsion-free points, and two that would
// cancel in one subset sum.
func TestTorsionFreeAllDetectsSmallOrderComponents(t *testing.T) {
	h := newHostile(t)
	clean := make([]curve.EdwardsPoint, 300)
	for i := range clean {
		clean[i].MulBasepoint(curve.ED25519_BASEPOINT_TABLE, randScalar())
	}
	if !torsionFreeAll([][]curve.EdwardsPoint{clean[:120], clean[120:]}, 2) {
		t.Fatal("torsion-free points rejected")
	}
	var t2, t4 curve.EdwardsPoint
	t4.Add(&h.torsn, &h.torsn)
	t2.Add(&t4, &t4)
	for name, tor := range map[string]*curve.EdwardsPoint{"order 8": &h.torsn, "order 4": &t4, "order 2": &t2} {
		for _, at := range [][]int{{7}, {0, 299}, {5, 6, 7, 8}} {
			pts := append([]curve.EdwardsPoint(nil), clean...)
			for _, i := range at {
				pts[i].Add(&pts[i], tor)
			}
			if torsionFreeAll([][]curve.EdwardsPoint{pts[:6], pts[6:]}, 2) {
				t.Fatalf("%s component at %v not detected", name, at)
			}
		}
	}
}

// A batch larger than the subset-sum threshold, split over cores, with
// torsion-carrying R and mixed-order keys among honest signatures gets
// crypto/ed25519's answers.
func TestVerifyLargeBatchMatchesSingle(t *testing.T) {
	for _, ctx := range contexts {
		t.Run(fmt.Sprintf("context=%q", ctx), func(t *testing.T) { largeBatchMatchesSingle(t, ctx) })
	}
}

func largeBatchMatchesSingle(t *testing.T, ctx string) {
	h := newHostile(t)
	pub, priv, _ := ed25519.GenerateKey(nil)
	var checks []Check
	for i := 0; i < 2*MinBatch+100; i++ {
		msg := []byte(fmt.Sprintf("m%d", i))
		sig := signHonest(t, priv, ctx, msg)
		k := pub
		switch i {
		case 17, 18:
			k, sig = h.sign(ctx, msg, 0, 4) // R with an order-2 component, twice: they cancel in half of all subset sums
		case 40, 2*MinBatch + 90:
			k, sig = h.sign(ctx, msg, 3, 0)
		}
		checks = append(checks, Check{k, msg, sig, ctx, false})
	}
	want, got := single(checks), Verify(checks)
	for i := range checks {
		if got[i] != want[i] {
			t.Fatalf("check %d: batch %v, crypto/ed25519 %v", i, got[i], want[i])
		}
	}
	if want[17] || want[18] {
		t.Fatal("torsion-R signatures should be invalid under crypto/ed25519")
	}
}

// FuzzVerify feeds arbitrary keys, messages, signatures and contexts,
// with RefuseWeakKey or without, beside honest ones with and without a
// context, and compares every answer with crypto/ed25519's (after
// edkey's for a check that refuses weak keys).
func FuzzVerify(f *testing.F) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	f.Add([]byte(pub), []byte("m"), ed25519.Sign(priv, []byte("m")), "", false)
	f.Add([]byte(pub), []byte("m"), signHonest(f, priv, contexts[1], []byte("m")), contexts[1], true)
	id := append([]byte{1}, make([]byte, 31)...)
	f.Add(id, []byte("m"), append(append([]byte{}, id...), make([]byte, 32)...), contexts[1], true)
	f.Add(make([]byte, 32), []byte{}, make([]byte, 64), "c", false)
	honest := append(honestPool(f, MinBatch/2, ""), honestPool(f, MinBatch/2, contexts[1])...)
	f.Fuzz(func(t *testing.T, key, msg, sig []byte, ctx string, strict bool) {
		checks := append(append(make([]Check, 0, MinBatch+1), honest...), Check{key, msg, sig, ctx, strict})
		got := Verify(checks)
		for i, c := range checks {
			want := len(c.PublicKey) == ed25519.PublicKeySize && (!c.RefuseWeakKey || edkey.Usable(c.PublicKey)) &&
				ed25519.VerifyWithOptions(c.PublicKey, c.Message, c.Signature, &ed25519.Options{Context: c.Context}) == nil
			if got[i] != want {
				t.Fatalf("check %d: batch %v, crypto/ed25519 %v", i, got[i], want)
			}
		}
	})
}

// The batch equation holds for a batch of valid signatures, so that Verify
// accepts them without the single-verification fallback, and fails when
// one signature of the batch is of another message.
func TestBatchEquationDecides(t *testing.T) {
	for _, ctx := range contexts {
		t.Run(fmt.Sprintf("context=%q", ctx), func(t *testing.T) { batchEquationDecides(t, ctx) })
	}
}

func batchEquationDecides(t *testing.T, ctx string) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	h := newHostile(t)
	var checks []Check
	for i := 0; i < 50; i++ {
		msg := []byte(fmt.Sprintf("m%d", i))
		checks = append(checks, Check{pub, msg, signHonest(t, priv, ctx, msg), ctx, false})
	}
	// Torsion that cancels is admitted to the batch and passes it.
	cpub, csig := h.signCancelling(ctx, []byte("cancelling"), 3)
	checks = append(checks, Check{cpub, []byte("cancelling"), csig, ctx, false})
	cands := make([]candidate, len(checks))
	for i, c := range checks {
		cands[i].i = i
		if !decodePoint(c.PublicKey, &cands[i].a) || !decodeSignature(c.Signature, &cands[i].r, &cands[i].s) {
			t.Fatalf("check %d does not decode", i)
		}
		challenge(c.Signature, c.PublicKey, c.Context, c.Message, &cands[i].k)
		var y curve.EdwardsPoint
		if smallOrderWitness(&cands[i], &y); !y.IsTorsionFree() {
			t.Fatalf("check %d: [k mod 8]A + R has a small-order part", i)
		}
	}
	bad := append([]candidate(nil), cands...) // batchEquation overwrites S and k
	bad[7].s = cands[8].s
	if !batchEquation(cands) {
		t.Fatal("batch equation fails on valid signatures")
	}
	if batchEquation(bad) {
		t.Fatal("batch equation holds with a wrong S")
	}
	// The challenge of another context (or none) fails the equation: the
	// context is part of what is signed.
	other := append([]candidate(nil), cands...)
	wrong := checks[9]
	wrong.Context = ctx + "x"
	if ctx != "" {
		wrong.Context = ""
	}
	challenge(wrong.Signature, wrong.PublicKey, wrong.Context, wrong.Message, &other[9].k)
	if batchEquation(other) {
		t.Fatalf("batch equation holds for a signature in context %q checked in context %q", ctx, wrong.Context)
	}
	var probe candidate
	hpub, hsig := h.sign(ctx, []byte("torsion R"), 0, 2)
	if !decodePoint(hpub, &probe.a) || !decodeSignature(hsig, &probe.r, &probe.s) {
		t.Fatal("hostile signature does not decode")
	}
	challenge(hsig, hpub, ctx, []byte("torsion R"), &probe.k)
	var y curve.EdwardsPoint
	if smallOrderWitness(&probe, &y); y.IsTorsionFree() {
		t.Fatal("R with a small-order part gives a torsion-free witness")
	}
}

// VerifyAppended gives Verify's answers when the messages are written on
// demand into reused buffers: for the hostile mix, batched and not, with
// every second message held and the others written.
func TestVerifyAppendedMatchesVerify(t *testing.T) {
	checks := hostileChecks(t, 40, contexts[1])
	all := append(append([]Check{}, honestPool(t, MinBatch, "")...), checks...)
	for _, batch := range [][]Check{all, checks} {
		want := Verify(batch)
		held := make([]Check, len(batch))
		for i, c := range batch {
			held[i] = c
			if i%2 == 0 {
				held[i].Message = nil
			}
		}
		got := VerifyAppended(held, func(i int, dst []byte) []byte {
			return append(dst, batch[i].Message...)
		})
		for i := range batch {
			if got[i] != want[i] {
				t.Fatalf("set of %d, check %d: appended %v, held %v", len(batch), i, got[i], want[i])
			}
		}
		wrong := VerifyAppended(held, func(i int, dst []byte) []byte { return append(dst, 'x') })
		for i := range batch {
			if i%2 == 0 && want[i] && wrong[i] {
				t.Fatalf("set of %d, check %d accepted over another message", len(batch), i)
			}
		}
	}
}

// A goroutine given more than maxBatch signatures verifies them in
// batches, each with its own torsion test: the hostile signatures, all
// together and each alone among honest ones (where only the torsion test
// tells a signature the cofactored equation passes), get crypto/ed25519's
// answers.
func TestVerifyInBatchesMatchesSingle(t *testing.T) {
	saved := maxBatch
	maxBatch = 100
	defer func() { maxBatch = saved }()
	checks := hostileChecks(t, 40, contexts[1])
	pool := honestPool(t, MinBatch, "")
	sets := [][]Check{append(append(append([]Check{}, pool[:150]...), checks...), pool[150:]...)}
	for i := 1; i < len(checks); i += 2 {
		sets = append(sets, append(append(append([]Check{}, pool[:150]...), checks[i]), pool[150:]...))
	}
	for _, set := range sets {
		got, want := Verify(set), single(set)
		for i := range set {
			if got[i] != want[i] {
				t.Fatalf("check %d of %d: batches %v, crypto/ed25519 %v", i, len(set), got[i], want[i])
			}
		}
	}
}

// Ed25519ctx checks get crypto/ed25519.VerifyWithOptions' answer in a set
// large enough to be batched, mixed with pure Ed25519 checks: a signature
// checked in another context, or without one, or a pure signature checked
// in a context, fails; a context of 255 bytes verifies and one of 256
// never does (crypto/ed25519 refuses it).
func TestVerifyContextsMatchVerifyWithOptions(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	long, tooLong := strings.Repeat("c", MaxContext), strings.Repeat("c", MaxContext+1)
	msg := []byte("update")
	ctxSig := signHonest(t, priv, contexts[1], msg)
	pureSig := ed25519.Sign(priv, msg)
	longSig := signHonest(t, priv, long, msg)
	h := newHostile(t)
	mpub, msig := h.sign(tooLong, msg, 0, 0) // a signature made with a 256-byte context
	tricky := []Check{
		{pub, msg, ctxSig, contexts[1], false},       // valid
		{pub, msg, ctxSig, "", false},                // a ctx signature checked as pure
		{pub, msg, ctxSig, contexts[1] + "x", false}, // another context
		{pub, msg, pureSig, contexts[1], false},      // a pure signature checked in a context
		{pub, msg, pureSig, "", false},               // valid
		{pub, msg, longSig, long, false},             // valid, 255-byte context
		{mpub, msg, msig, tooLong, false},            // 256-byte context: never valid
		{pub, msg, nonCanonicalS(ctxSig), contexts[1], false},
	}
	pool := append(honestPool(t, MinBatch/2, contexts[1]), honestPool(t, MinBatch/2, "")...)
	sets := [][]Check{tricky, append(append(append([]Check{}, pool...), hostileChecks(t, 16, contexts[1])...), tricky...)}
	for _, c := range tricky { // each alone among valid ones: the batch equation decides
		sets = append(sets, append(append([]Check{}, pool...), c))
	}
	for _, set := range sets {
		got, want := Verify(set), single(set)
		for i := range set {
			if got[i] != want[i] {
				t.Fatalf("set of %d, check %d: Verify %v, crypto/ed25519 %v", len(set), i, got[i], want[i])
			}
		}
	}
	want := []bool{true, false, false, false, true, true, false, false}
	for i, ok := range single(tricky) {
		if ok != want[i] {
			t.Fatalf("crypto/ed25519 answers %v for tricky check %d, the test expects %v", ok, i, want[i])
		}
	}
	// single itself must agree with VerifyWithOptions on each context.
	for i, c := range tricky {
		ref := ed25519.VerifyWithOptions(c.PublicKey, c.Message, c.Signature, &ed25519.Options{Context: c.Context}) == nil
		if ref != want[i] {
			t.Fatalf("VerifyWithOptions answers %v for tricky check %d", ref, i)
		}
	}
}

// COMP-320: with RefuseWeakKey a check accepts exactly when edkey.Usable
// accepts its key and crypto/ed25519 its signature: keys of small order
// (each of the eight, in canonical and non-canonical encodings) with
// signatures crypto/ed25519 accepts are refused, batched or not, while
// mixed-order keys, which edkey allows, keep crypto/ed25519's answer.
func TestRefuseWeakKeyMatchesEdkey(t *testing.T) {
	h := newHostile(t)
	ctx := contexts[1]
	var weak []Check
	var p curve.EdwardsPoint
	p.Identity()
	for i := 0; i < 8; i++ { // i·T, R = the identity, S = 0
		weak = append(weak, Check{encode(&p), []byte("m"), append(encode(new(curve.EdwardsPoint).Identity()), make([]byte, 32)...), ctx, true})
		p.Add(&p, &h.torsn)
	}
	idSig := append(encode(new(curve.EdwardsPoint).Identity()), make([]byte, 32)...)
	negZero := make([]byte, 32) // the identity with the sign bit set
	negZero[0], negZero[31] = 1, 0x80
	pPlusOne := make([]byte, 32) // y = p + 1, which reduces to the identity's y
	pPlusOne[0], pPlusOne[31] = 0xee, 0x7f
	for i := 1; i < 31; i++ {
		pPlusOne[i] = 0xff
	}
	weak = append(weak, Check{negZero, []byte("m"), idSig, ctx, true}, Check{pPlusOne, []byte("m"), idSig, ctx, true})
	for i := 1; i < 8; i++ { // mixed-order keys: usable
		pub, sig := h.sign(ctx, []byte("m"), i, 0)
		weak = append(weak, Check{pub, []byte("m"), sig, ctx, true})
	}
	// The reference: edkey, then crypto/ed25519 itself.
	ref := func(c Check) bool {
		return edkey.Usable(c.PublicKey) &&
			ed25519.VerifyWithOptions(c.PublicKey, c.Message, c.Signature, &ed25519.Options{Context: c.Context}) == nil
	}
	accepted := 0
	for _, c := range weak {
		if !edkey.Usable(c.PublicKey) && ed25519.VerifyWithOptions(c.PublicKey, c.Message, c.Signature, &ed25519.Options{Context: c.Context}) == nil {
			accepted++
		}
	}
	if accepted < 3 {
		t.Fatalf("test setup: crypto/ed25519 accepts only %d signatures of weak keys", accepted)
	}
	pool := honestPool(t, MinBatch, ctx)
	for i := range pool {
		pool[i].RefuseWeakKey = true
	}
	sets := [][]Check{weak, append(append([]Check{}, pool...), weak...)}
	for _, c := range weak { // each alone among valid ones: batched
		sets = append(sets, append(append([]Check{}, pool...), c))
	}
	for n, set := range sets {
		for i, got := range Verify(set) {
			if want := ref(set[i]); got != want {
				t.Fatalf("set %d, check %d: Verify %v, edkey and crypto/ed25519 %v", n, i, got, want)
			}
		}
	}
}
