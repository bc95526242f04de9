// Package ed25519batch verifies many Ed25519 signatures at once (a
// multi-scalar multiplication with curve25519-voi per core, over batches
// of at most a few thousand signatures) and accepts exactly what
// crypto/ed25519 accepts, one signature at a time: pure Ed25519 (RFC 8032)
// with [ed25519.Verify], and Ed25519ctx with [ed25519.VerifyWithOptions]
// for a check that names a context. A batch may mix both.
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
// with the check's context otherwise. It spreads the work over up to
// runtime.GOMAXPROCS(0) goroutines.
func Verify(checks []Check) []bool { return VerifyAppended(checks, nil) }

// VerifyAppended is Verify for messages written when needed instead of
// held: the message of a check whose Message is nil is message(i, dst),
// which appends check i's message to dst and returns the result. A
// batch hashes each message once from a buffer its goroutine reuses, so
// thousands of messages are never held at once; message is called from
// several goroutines at once, and again for a check verified on its own.
func VerifyAppended(checks []Check, message func(i int, dst []byte) []byte) []bool {
	m := messages{checks: checks, fn: message}
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
				out[i] = m.verifyOne(i)
			}
		})
		return out
	}
	if share := (len(checks) + workers - 1) / workers; share > maxBatch {
		parts(func(_, lo, hi int) { verifyInBatches(m, lo, hi, out) })
		return out
	}
	chunks := make([][]candidate, workers)
	witnesses := make([][]curve.EdwardsPoint, workers) // Y_i of chunks[k][i]
	parts(func(k, lo, hi int) { chunks[k], witnesses[k] = decode(m, lo, hi, out) })
	// Every Y_i must be torsion-free; when the combined test fails, find
	// the signatures whose Y_i is not and verify those alone.
	if !torsionFreeAll(witnesses, workers) {
		for k, c := range chunks {
			kept := c[:0]
			for j, d := range c {
				if witnesses[k][j].IsTorsionFree() {
					kept = append(kept, d)
				} else {
					out[d.i] = m.verifyOne(d.i)
				}
			}
			chunks[k] = kept
		}
	}
	parts(func(k, _, _ int) { settle(m, chunks[k], out) })
	return out
}

// maxBatch is the most signatures one goroutine decodes and holds at
// once (about 550 bytes each): a goroutine given more verifies them in
// batches of equal size up to maxBatch, each with its own torsion test
// (about torsionTests scalar multiplications), reusing the memory of the
// decoded points. A variable so that tests can lower it.
var maxBatch = 4096

// verifyInBatches verifies checks[lo:hi] in batches of at most maxBatch.
func verifyInBatches(m messages, lo, hi int, out []bool) {
	batches := (hi - lo + maxBatch - 1) / maxBatch
	size := (hi - lo + batches - 1) / batches
	cands, ys := make([]candidate, 0, size), make([]curve.EdwardsPoint, 0, size)
	for b := range batches {
		from, to := lo+b*(hi-lo)/batches, lo+(b+1)*(hi-lo)/batches
		cands, ys = decodeInto(m, from, to, out, cands[:0], ys[:0])
		if !torsionFreeAll([][]curve.EdwardsPoint{ys}, 1) {
			kept := cands[:0]
			for j, d := range cands {
				if ys[j].IsTorsionFree() {
					kept = append(kept, d)
				} else {
					out[d.i] = m.verifyOne(d.i)
				}
			}
			cands = kept
		}
		settle(m, cands, out)
	}
}

// messages gives the checks' messages: held, or written by fn.
type messages struct {
	checks []Check
	fn     func(i int, dst []byte) []byte
}

// message returns check i's message, appended to dst when written.
func (m messages) message(i int, dst []byte) []byte {
	if msg := m.checks[i].Message; msg != nil || m.fn == nil {
		return msg
	}
	return m.fn(i, dst)
}

// verifyOne is crypto/ed25519's answer for check i.
func (m messages) verifyOne(i int) bool {
	c := m.checks[i]
	if len(c.PublicKey) != ed25519.PublicKeySize || c.RefuseWeakKey && !edkey.Usable(c.PublicKey) {
		return false
	}
	if c.Context == "" {
		return ed25519.Verify(ed25519.PublicKey(c.PublicKey), m.message(i, nil), c.Signature)
	}
	return ed25519.VerifyWithOptions(ed25519.PublicKey(c.PublicKey), m.message(i, nil), c.Signature, &ed25519.Options{Context: c.Context}) == nil
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
func decode(m messages, lo, hi int, out []bool) ([]candidate, []curve.EdwardsPoint) {
	return decodeInto(m, lo, hi, out, make([]candidate, 0, hi-lo), make([]curve.EdwardsPoint, 0, hi-lo))
}

// decodeInto is decode appending to cands and ys.
func decodeInto(m messages, lo, hi int, out []bool, cands []candidate, ys []curve.EdwardsPoint) ([]candidate, []curve.EdwardsPoint) {
	var scratch []byte // the written messages, one at a time
	for i := lo; i < hi; i++ {
		c := m.checks[i]
		cands = append(cands, candidate{i: i})
		d := &cands[len(cands)-1]
		if len(c.Context) > MaxContext || !decodePoint(c.PublicKey, &d.a) || !decodeSignature(c.Signature, &d.r, &d.s) {
			cands = cands[:len(cands)-1]
			out[i] = m.verifyOne(i)
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
		msg := m.message(i, scratch[:0])
		if c.Message == nil {
			scratch = msg
		}
		challenge(c.Signature, c.PublicKey, c.Context, msg, &d.k)
		ys = append(ys, curve.EdwardsPoint{})
		smallOrderWitness(d, &ys[len(ys)-1])
	}
	return cands, ys
}

// settle sets out for candidates whose witnesses are torsion-free: true
// for all when their batch equation holds, else each one's own verdict.
func settle(m messages, cands []candidate, out []bool) {
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
		out[c.i] = m.verifyOne(c.i)
	}
}

// challenge sets k = SHA-512(R ‖ A ‖ M) mod L, with dom2(0, C) first
// for a context C, as crypto/ed25519 does. The context is at most
// MaxContext bytes.
func challenge(sig, pub []byte, context string, msg []byte, k *scalar.Scalar) {
	h := sha512.New()
	if context != "" {
		h.Write([]byte(dom2Prefix))
		h.Write([]byte{0, byte(len(context))})
		h.Write([]byte(context))
	}
	h.Write(sig[:32])
	h.Write(pub)
	h.Write(msg)
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
// signatures crypto/ed25519 accepts. The coefficients of R_j and A_j
// replace S_j and k_j in the candidates (which are not read again: a
// batch that fails is verified from its checks).
func batchEquation(cands []candidate) bool {
	n := len(cands)
	scalars := make([]*scalar.Scalar, 1+2*n)
	terms := make([]*curve.EdwardsPoint, 1+2*n)
	var sumS scalar.Scalar
	scalars[0], terms[0] = &sumS, curve.ED25519_BASEPOINT_POINT
	var z, zs scalar.Scalar
	var wide [32]byte
	var draws [16 * 64]byte // random z_j, 64 at a time
	for j := range cands {
		if j%64 == 0 {
			if _, err := rand.Read(draws[:]); err != nil {
				return false
			}
		}
		c := &cands[j]
		copy(wide[:16], draws[16*(j%64):16*(j%64)+16])
		if _, err := z.SetBytesModOrder(wide[:]); err != nil {
			return false
		}
		sumS.Add(&sumS, zs.Mul(&z, &c.s)) // Σ z_j S_j
		c.s.Set(&z)                       // z_j for R_j
		c.k.Mul(&z, &c.k)                 // z_j k_j for A_j
		scalars[1+j], terms[1+j] = &c.s, &c.r
		scalars[1+n+j], terms[1+n+j] = &c.k, &c.a
	}
	sumS.Neg(&sumS)
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
