// Package ed25519batch verifies many Ed25519 signatures at once (one
// multi-scalar multiplication with curve25519-voi, spread over the
// available cores) and accepts exactly what crypto/ed25519 accepts, one
// signature at a time: pure Ed25519 (RFC 8032) with [ed25519.Verify], and
// Ed25519ctx with [ed25519.VerifyWithOptions] for a check that names a
// context. A batch may mix both.
//
// # Contexts
//
// Ed25519ctx differs from pure Ed25519 only in its challenge:
// k = SHA-512(dom2(0, C) ‖ R ‖ A ‖ M) mod L, where dom2(0, C) is the
// 32 bytes "SigEd25519 no Ed25519 collisions", a zero byte (no
// prehash), one byte holding the length of the context C, and C. As in
// crypto/ed25519 an empty context selects pure Ed25519, and a context
// longer than 255 bytes verifies nothing. Everything below holds for
// either challenge.
//
// # Cofactor rule
//
// crypto/ed25519 verifies cofactorless: it accepts when the encoding of
// [S]B − [k]A equals the signature's R bytes, with S canonical (S < L), k =
// SHA-512(R ‖ A ‖ M) mod L, A any decodable encoding (non-canonical and
// small-order A allowed) and R compared as bytes (so a non-canonical R
// never verifies). A batch checks the cofactored equation
// [8](Σ z_i([S_i]B − R_i − [k_i]A_i)) = 0 with random 128-bit z_i, which
// on its own also accepts a signature whose difference point
// D_i = [S_i]B − [k_i]A_i − R_i is a nonzero point of small order.
//
// A signature enters a batch only when its S is canonical and its A and R
// are canonical encodings of points, and the small-order part of D_i is
// known to be zero. That part is the small-order part of
// Y_i = [k_i mod 8]A_i + R_i (B has prime order, and a small-order
// component has order dividing 8), so the rule is: Y_i is torsion-free.
// When the batch equation holds, each D_i has no prime-order part either,
// so D_i = 0 and R_i = [S_i]B − [k_i]A_i, the equation crypto/ed25519
// checks; conversely a signature crypto/ed25519 accepts has D_i = 0. This
// admits everything the commit-log reader's verifier admits (companion
// spec COMP-097: A and R torsion-free make Y_i torsion-free) and also
// signatures whose torsion components cancel, for which both equations
// hold alike. Any other signature (non-canonical encodings, wrong lengths,
// a Y_i with a small-order part) is verified on its own with
// crypto/ed25519, and so is every signature of a batch that fails.
//
// The Y_i of one batch are tested for torsion together, by random subset
// sums multiplied by the group order ([torsionFreeAll]), which misses a
// small-order component with probability at most 2^-128 — the bound of the
// batch equation itself; the points of a batch that fails that test are
// checked one by one.
package ed25519batch

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha512"
	"runtime"
	"sync"

	"github.com/oasisprotocol/curve25519-voi/curve"
	"github.com/oasisprotocol/curve25519-voi/curve/scalar"

	"github.com/regroup-mls/regroup/internal/edkey"
)

// Check is one Ed25519 signature to verify.
type Check struct {
	PublicKey []byte
	Message   []byte
	Signature []byte
	// Context, when not empty, makes the check Ed25519ctx with this
	// context string (at most [MaxContext] bytes); empty is pure Ed25519.
	Context string
	// RefuseWeakKey also refuses a public key [edkey.Check] refuses (a
	// non-canonical encoding or a point of small order, COMP-320), so the
	// check accepts exactly when edkey.Usable and crypto/ed25519 both do.
	// A batch decodes the key anyway: it costs a few point doublings more
	// than the signature alone, where edkey.Usable before the batch would
	// decode the key a second time.
	RefuseWeakKey bool
}

// MaxContext is the longest context Ed25519ctx allows (RFC 8032).
const MaxContext = 255

// dom2Prefix starts dom2(x, y) of RFC 8032, section 2.
const dom2Prefix = "SigEd25519 no Ed25519 collisions"

// MinShare is the fewest signatures worth handing to another core.
const MinShare = 32

// MinBatch is the fewest signatures worth a batch: the torsion test costs
// about torsionTests scalar multiplications whatever the batch size, as
// much as verifying that many signatures alone, so smaller sets are
// verified one by one (spread over the cores).
const MinBatch = 256

// Verify returns, for each check, whether crypto/ed25519 accepts it:
// [ed25519.Verify] for a check without a context, [ed25519.VerifyWithOptions]
// with the check's context otherwise. It spreads the work over up to runtime.GOMAXPROCS(0) goroutines.
func Verify(checks []Check) []bool {
	out := make([]bool, len(checks))
	workers := max(1, min(runtime.GOMAXPROCS(0), len(checks)/MinShare))
	parts := func(f func(k, lo, hi int)) {
		if workers == 1 {
			f(0, 0, len(checks))
			return
		}
		var wg sync.WaitGroup
		for k := range workers {
			lo, hi := k*len(checks)/workers, (k+1)*len(checks)/workers
			wg.Go(func() { f(k, lo, hi) })
		}
		wg.Wait()
	}
	if len(checks) < MinBatch {
		parts(func(_, lo, hi int) {
			for i := lo; i < hi; i++ {
				out[i] = verifyOne(checks[i])
			}
		})
		return out
	}
	chunks := make([][]candidate, workers)
	witnesses := make([][]curve.EdwardsPoint, workers) // Y_i of chunks[k][i]
	parts(func(k, lo, hi int) { chunks[k], witnesses[k] = decode(checks, lo, hi, out) })
	// Every Y_i must be torsion-free; when the combined test fails, find
	// the signatures whose Y_i is not and verify those alone.
	if !torsionFreeAll(witnesses, workers) {
		for k, c := range chunks {
			kept := c[:0]
			for j, d := range c {
				if witnesses[k][j].IsTorsionFree() {
					kept = append(kept, d)
				} else {
					out[d.i] = verifyOne(checks[d.i])
				}
			}
			chunks[k] = kept
		}
	}
	parts(func(k, _, _ int) { settle(checks, chunks[k], out) })
	return out
}

// verifyOne is crypto/ed25519's answer for one check.
func verifyOne(c Check) bool {
	if len(c.PublicKey) != ed25519.PublicKeySize || c.RefuseWeakKey && !edkey.Usable(c.PublicKey) {
		return false
	}
	if c.Context == "" {
		return ed25519.Verify(ed25519.PublicKey(c.PublicKey), c.Message, c.Signature)
	}
	return ed25519.VerifyWithOptions(ed25519.PublicKey(c.PublicKey), c.Message, c.Signature, &ed25519.Options{Context: c.Context}) == nil
}

// candidate is a decoded signature that may enter a batch.
type candidate struct {
	i    int // index in the checks
	a, r curve.EdwardsPoint
	s, k scalar.Scalar
}

// decode returns the candidates among checks[lo:hi], with the small-order
// witness Y = [k mod 8]A + R of each, and sets out[i] for the others,
// verified on their own.
func decode(checks []Check, lo, hi int, out []bool) ([]candidate, []curve.EdwardsPoint) {
	cands := make([]candidate, 0, hi-lo)
	ys := make([]curve.EdwardsPoint, 0, hi-lo)
	for i := lo; i < hi; i++ {
		c := checks[i]
		cands = append(cands, candidate{i: i})
		d := &cands[len(cands)-1]
		if len(c.Context) > MaxContext || !decodePoint(c.PublicKey, &d.a) || !decodeSignature(c.Signature, &d.r, &d.s) {
			cands = cands[:len(cands)-1]
			out[i] = verifyOne(c)
			continue
		}
		if c.RefuseWeakKey && d.a.IsSmallOrder() {
			// A canonical encoding of a point of small order: edkey
			// refuses it (a key that does not decode, or decodes from a
			// non-canonical encoding, went to verifyOne above).
			cands = cands[:len(cands)-1]
			out[i] = false
			continue
		}
		challenge(c, &d.k)
		ys = append(ys, curve.EdwardsPoint{})
		smallOrderWitness(d, &ys[len(ys)-1])
	}
	return cands, ys
}

// settle sets out for candidates whose witnesses are torsion-free: true
// for all when their batch equation holds, else each one's own verdict.
func settle(checks []Check, cands []candidate, out []bool) {
	if len(cands) == 0 {
		return
	}
	if batchEquation(cands) {
		for _, c := range cands {
			out[c.i] = true
		}
		return
	}
	for _, c := range cands {
		out[c.i] = verifyOne(checks[c.i])
	}
}

// challenge sets k = SHA-512(R ‖ A ‖ M) mod L, with dom2(0, C) first
// for a check with a context C, as crypto/ed25519 does. The context is at
// most MaxContext bytes.
func challenge(c Check, k *scalar.Scalar) {
	h := sha512.New()
	if c.Context != "" {
		h.Write([]byte(dom2Prefix))
		h.Write([]byte{0, byte(len(c.Context))})
		h.Write([]byte(c.Context))
	}
	h.Write(c.Signature[:32])
	h.Write(c.PublicKey)
	h.Write(c.Message)
	var digest [sha512.Size]byte
	_, _ = k.SetBytesModOrderWide(h.Sum(digest[:0])) // 64 bytes: cannot fail
}

// smallOrderWitness sets y = [k mod 8]A + R, whose small-order part is
// that of k·A + R: zero exactly when the signature's difference point
// has no small-order part.
func smallOrderWitness(c *candidate, y *curve.EdwardsPoint) {
	var kb [scalar.ScalarSize]byte
	_ = c.k.ToBytes(kb[:])
	y.Set(&c.r)
	var a curve.EdwardsPoint
	a.Set(&c.a)
	for bit := range 3 { // y += [k mod 8]A, bit by bit
		if kb[0]>>bit&1 == 1 {
			y.Add(y, &a)
		}
		if bit < 2 {
			a.Add(&a, &a)
		}
	}
}

// batchEquation checks the cofactored batch equation with random 128-bit
// z_j over the candidates:
//
//	[8]([−Σ z_j S_j]B + Σ [z_j]R_j + Σ [z_j k_j]A_j) = 0,
//
// the sum of z_j times −([S_j]B − [k_j]A_j − R_j), which is zero for
// signatures crypto/ed25519 accepts.
func batchEquation(cands []candidate) bool {
	n := len(cands)
	zs := make([]byte, 16*n)
	if _, err := rand.Read(zs); err != nil {
		return false
	}
	coeffs := make([]scalar.Scalar, 1+2*n)
	scalars := make([]*scalar.Scalar, 1+2*n)
	terms := make([]*curve.EdwardsPoint, 1+2*n)
	scalars[0], terms[0] = &coeffs[0], curve.ED25519_BASEPOINT_POINT
	var z, zs32 scalar.Scalar
	var wide [32]byte
	for j := range cands {
		c := &cands[j]
		copy(wide[:16], zs[16*j:16*j+16])
		if _, err := z.SetBytesModOrder(wide[:]); err != nil {
			return false
		}
		coeffs[0].Add(&coeffs[0], zs32.Mul(&z, &c.s)) // Σ z_j S_j
		coeffs[1+j].Set(&z)                           // z_j for R_j
		coeffs[1+n+j].Mul(&z, &c.k)                   // z_j k_j for A_j
		scalars[1+j], terms[1+j] = &coeffs[1+j], &c.r
		scalars[1+n+j], terms[1+n+j] = &coeffs[1+n+j], &c.a
	}
	coeffs[0].Neg(&coeffs[0])
	var sum curve.EdwardsPoint
	sum.MultiscalarMulVartime(scalars, terms)
	return sum.IsSmallOrder()
}

// decodePoint decodes a canonical 32-byte encoding of a point into p.
func decodePoint(enc []byte, p *curve.EdwardsPoint) bool {
	if len(enc) != ed25519.PublicKeySize {
		return false
	}
	c, err := curve.NewCompressedEdwardsYFromBytes(enc)
	if err != nil || !c.IsCanonicalVartime() {
		return false
	}
	_, err = p.SetCompressedY(c)
	return err == nil
}

// decodeSignature reports a 64-byte signature with a canonical S and a
// canonical encoding of a point R, which it decodes into r and s.
func decodeSignature(sig []byte, r *curve.EdwardsPoint, s *scalar.Scalar) bool {
	if len(sig) != ed25519.SignatureSize {
		return false
	}
	if _, err := s.SetCanonicalBytes(sig[32:]); err != nil {
		return false
	}
	return decodePoint(sig[:32], r)
}
