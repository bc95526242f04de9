package secrettree

import (
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
)

// ratchet is one hash ratchet of §9.1. secret is the ratchet secret of
// generation gen, the next one not yet derived; skipped holds derived keys
// not yet used.
type ratchet struct {
	suite   *ciphersuite.Suite
	opts    *Options
	secret  []byte
	gen     uint32
	done    bool // the last generation has been derived
	skipped map[uint32]*KeyNonce
	order   []uint32 // skipped generations, oldest first
}

// derive returns the key and nonce of r.gen and advances to r.gen+1,
// erasing the old ratchet secret.
func (r *ratchet) derive() (*KeyNonce, error) {
	if r.done {
		return nil, ErrExhausted
	}
	s := r.suite
	key, err := s.DeriveTreeSecret(r.secret, "key", r.gen, s.KeySize())
	if err != nil {
		return nil, err
	}
	nonce, err := s.DeriveTreeSecret(r.secret, "nonce", r.gen, s.NonceSize())
	if err != nil {
		return nil, err
	}
	next, err := s.DeriveTreeSecret(r.secret, "secret", r.gen, s.HashSize())
	if err != nil {
		return nil, err
	}
	kn := &KeyNonce{Generation: r.gen, Key: key, Nonce: nonce}
	clear(r.secret)
	r.secret = next
	if r.gen == ^uint32(0) {
		r.done = true
	} else {
		r.gen++
	}
	return kn, nil
}

// next hands out the key of the next generation for sending.
func (r *ratchet) next() (KeyNonce, error) {
	kn, err := r.derive()
	if err != nil {
		return KeyNonce{}, err
	}
	return *kn, nil
}

// at returns the stored or newly derived key of generation gen, storing
// keys of generations skipped on the way.
func (r *ratchet) at(gen uint32) (*KeyNonce, error) {
	if kn, ok := r.skipped[gen]; ok {
		return kn, nil
	}
	if gen < r.gen || r.done {
		return nil, fmt.Errorf("%w: generation %d", ErrGenerationUsed, gen)
	}
	if gen-r.gen > r.opts.MaxSkip {
		return nil, fmt.Errorf("%w: generation %d, next expected %d, window %d", ErrGenerationTooFar, gen, r.gen, r.opts.MaxSkip)
	}
	for {
		g := r.gen
		kn, err := r.derive()
		if err != nil {
			return nil, err
		}
		r.store(kn)
		if g == gen {
			return kn, nil
		}
	}
}

// store keeps kn among the skipped keys, dropping the oldest beyond the bound.
func (r *ratchet) store(kn *KeyNonce) {
	r.skipped[kn.Generation] = kn
	r.order = append(r.order, kn.Generation)
	for len(r.skipped) > r.opts.MaxStored && len(r.order) > 0 {
		old := r.order[0]
		r.order = r.order[1:]
		if k, ok := r.skipped[old]; ok {
			k.erase()
			delete(r.skipped, old)
		}
	}
	if len(r.order) > 2*r.opts.MaxStored+16 { // compact generations already used
		kept := r.order[:0]
		for _, g := range r.order {
			if _, ok := r.skipped[g]; ok {
				kept = append(kept, g)
			}
		}
		r.order = kept
	}
}
