package commitlog

import (
	"crypto/ed25519"
	"sync"

	"github.com/oasisprotocol/curve25519-voi/curve"
	"github.com/oasisprotocol/curve25519-voi/curve/scalar"
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"

	"github.com/regroup-mls/regroup/internal/ed25519batch"
	"github.com/regroup-mls/regroup/internal/edkey"
)

// BatchVerifier checks many signatures with one multi-scalar
// multiplication (curve25519-voi) and accepts exactly what crypto/ed25519
// accepts under a key internal/edkey accepts (COMP-320).
//
// # Cofactor rule
//
// crypto/ed25519 verifies cofactorless: it accepts when the encoding of
// [S]B − [k]A equals the signature's R bytes, with S canonical (S < L), A
// any decodable encoding (non-canonical and small-order A allowed) and R
// compared as bytes (so a non-canonical R never verifies). A batch checks
// the cofactored equation [8](Σ z_i([S_i]B − R_i − [k_i]A_i)) = 0, which
// on its own also accepts a signature whose difference point is a nonzero
// point of small order.
//
// BatchVerifier closes that gap by admitting a signature to the batch only
// when its A and R are canonical encodings of torsion-free points (in the
// prime-order subgroup) and its S is canonical. Then every difference point
// lies in the prime-order subgroup, where [8]P = 0 implies P = 0, so the
// cofactored and cofactorless equations agree. Any other signature (small
// or mixed-order A or R, non-canonical encodings, wrong lengths) is
// verified on its own with crypto/ed25519. When a batch fails, each of its
// signatures is verified on its own with crypto/ed25519.
//
// A is checked once per key and cached (a conversation's commit-log id and
// its few authors repeat). The R values of one call are checked together
// by random subset sums multiplied by the group order (ed25519batch.TorsionFree),
// which misses a small-order component with probability at most 2^-128 —
// the same bound as the random-linear-combination batch equation itself;
// the points of a call that fails that test are checked one by one.
type BatchVerifier struct {
	mu   sync.Mutex
	keys map[string]*batchKey
}

type batchKey struct {
	expanded *voi.ExpandedPublicKey
	ok       bool // canonical, decodable and torsion-free
}

// maxCachedKeys bounds the key cache; it is cleared when full.
const maxCachedKeys = 4096

var batchVerifyOptions = &voi.VerifyOptions{AllowSmallOrderA: true, AllowSmallOrderR: true}

// NewBatchVerifier returns a BatchVerifier with an empty key cache.
func NewBatchVerifier() *BatchVerifier {
	return &BatchVerifier{keys: make(map[string]*batchKey)}
}

// VerifyAll verifies the checks, batching those the cofactor rule admits.
func (v *BatchVerifier) VerifyAll(checks []SignatureCheck) []bool {
	out := make([]bool, len(checks))
	type candidate struct {
		i int
		k *batchKey
	}
	var cands []candidate
	var rs []curve.EdwardsPoint
	for i, c := range checks {
		k := v.key(c.PublicKey)
		var r curve.EdwardsPoint
		if k == nil || !decodeSignature(c.Signature, &r) {
			out[i] = verifyOne(c)
			continue
		}
		cands = append(cands, candidate{i, k})
		rs = append(rs, r)
	}
	if len(cands) == 0 {
		return out
	}
	// Every R must be torsion-free; when the combined test fails, find the
	// ones that are not and verify those on their own.
	if !ed25519batch.TorsionFree(rs) {
		kept := cands[:0]
		for j, c := range cands {
			if rs[j].IsTorsionFree() {
				kept = append(kept, c)
			} else {
				out[c.i] = verifyOne(checks[c.i])
			}
		}
		cands = kept
	}
	bv := voi.NewBatchVerifierWithCapacity(len(cands))
	for _, c := range cands {
		ch := checks[c.i]
		bv.AddExpandedWithOptions(c.k.expanded, ch.Message, ch.Signature, &voi.Options{
			Hash:    ch.Options.Hash,
			Context: ch.Options.Context,
			Verify:  batchVerifyOptions,
		})
	}
	if len(cands) > 0 && bv.VerifyBatchOnly(nil) {
		for _, c := range cands {
			out[c.i] = true
		}
		return out
	}
	for _, c := range cands {
		out[c.i] = verifyOne(checks[c.i])
	}
	return out
}

// key returns the cached expansion of a batchable key, nil when the key
// must be verified singly.
func (v *BatchVerifier) key(pub []byte) *batchKey {
	if len(pub) != ed25519.PublicKeySize {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.keys == nil {
		v.keys = make(map[string]*batchKey)
	}
	if k, ok := v.keys[string(pub)]; ok {
		if !k.ok {
			return nil
		}
		return k
	}
	if len(v.keys) >= maxCachedKeys {
		clear(v.keys)
	}
	k := &batchKey{}
	if torsionFreeCanonical(pub) && edkey.Usable(pub) { // COMP-320: the identity is torsion-free but proves nothing
		if xp, err := voi.NewExpandedPublicKey(voi.PublicKey(pub)); err == nil {
			k.expanded, k.ok = xp, true
		}
	}
	v.keys[string(pub)] = k
	if !k.ok {
		return nil
	}
	return k
}

// decodeSignature reports a 64-byte signature with a canonical S and a
// canonical encoding of a point R, which it decodes into r.
func decodeSignature(sig []byte, r *curve.EdwardsPoint) bool {
	if len(sig) != ed25519.SignatureSize {
		return false
	}
	var s scalar.Scalar
	if _, err := s.SetCanonicalBytes(sig[32:]); err != nil {
		return false
	}
	c, err := curve.NewCompressedEdwardsYFromBytes(sig[:32])
	if err != nil || !c.IsCanonicalVartime() {
		return false
	}
	_, err = r.SetCompressedY(c)
	return err == nil
}

// torsionFreeCanonical reports a canonical encoding of a point in the
// prime-order subgroup.
func torsionFreeCanonical(enc []byte) bool {
	c, err := curve.NewCompressedEdwardsYFromBytes(enc)
	if err != nil || !c.IsCanonicalVartime() {
		return false
	}
	var p curve.EdwardsPoint
	if _, err := p.SetCompressedY(c); err != nil {
		return false
	}
	return p.IsTorsionFree()
}
