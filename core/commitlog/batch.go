package commitlog

import (
	"crypto/ed25519"
	"sync"

	"github.com/oasisprotocol/curve25519-voi/curve"
	"github.com/oasisprotocol/curve25519-voi/curve/scalar"
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// BatchVerifier checks many signatures with one multi-scalar
// multiplication (curve25519-voi) and accepts exactly what crypto/ed25519
// accepts.
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
// signatures is verified on its own with crypto/ed25519, so the answer for
// every signature is always crypto/ed25519's. Torsion checks of A are
// cached per key (a conversation's commit-log id and its few authors
// repeat); R is checked per signature.
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
	var batched []int
	bv := voi.NewBatchVerifierWithCapacity(len(checks))
	for i, c := range checks {
		k := v.key(c.PublicKey)
		if k == nil || !batchableSignature(c.Signature) {
			out[i] = verifyOne(c)
			continue
		}
		bv.AddExpandedWithOptions(k.expanded, c.Message, c.Signature, &voi.Options{
			Hash:    c.Options.Hash,
			Context: c.Options.Context,
			Verify:  batchVerifyOptions,
		})
		batched = append(batched, i)
	}
	if len(batched) == 0 {
		return out
	}
	if bv.VerifyBatchOnly(nil) {
		for _, i := range batched {
			out[i] = true
		}
		return out
	}
	for _, i := range batched {
		out[i] = verifyOne(checks[i])
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
	if torsionFreeCanonical(pub) {
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

// batchableSignature reports a 64-byte signature with a canonical,
// torsion-free R and a canonical S.
func batchableSignature(sig []byte) bool {
	if len(sig) != ed25519.SignatureSize {
		return false
	}
	var s scalar.Scalar
	if _, err := s.SetCanonicalBytes(sig[32:]); err != nil {
		return false
	}
	return torsionFreeCanonical(sig[:32])
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
