package join

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"

	"github.com/regroup-mls/regroup/ports"
)

// hostedPlain records what plugin-hosted algorithms ([ports.Hosted])
// returned during one attempt: the first plugin's name and a digest of
// every plaintext they returned, in order.
type hostedPlain struct {
	name string
	sum  hash.Hash
}

func (p *hostedPlain) reset() { p.name, p.sum = "", nil }

// add records plaintexts alg returned, when a plugin serves alg.
func (p *hostedPlain) add(alg any, plain ...[]byte) {
	h, ok := alg.(ports.Hosted)
	if !ok {
		return
	}
	if p.sum == nil {
		p.name, p.sum = h.HostedBy(), sha256.New()
	}
	for _, b := range plain {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		p.sum.Write(n[:])
		p.sum.Write(b)
	}
}

func (p *hostedPlain) digest() []byte {
	if p.sum == nil {
		return nil
	}
	return p.sum.Sum(nil)
}

// recheckHosted decides a Welcome whose plaintext, returned by a plugin,
// could not be read (cause: a rejection or hold of that plaintext), before
// the MLS Welcome authenticated it (COMP-272). The plugin may be at fault,
// not the Welcome, so it is never rejected at once: the Welcome is opened
// again, and an honest wrapper or AEAD returns the same plaintext for the
// same ciphertext and key. A plugin that now fails or returns something
// else is at fault: the Welcome is retried (JOIN-085). One that returns
// the same plaintext is held as unreadable under JOIN-087's clock:
// retried at every attempt, rejected only when it still cannot be read a
// day after the first such result.
func (r *Receiver) recheckHosted(ctx context.Context, h ports.HeldWelcome, cause error) error {
	name, first := r.hosted.name, r.hosted.digest()
	r.hosted.reset()
	env, err := decodeHeld(h)
	if err != nil {
		return err
	}
	_, err = r.open(ctx, env)
	switch {
	case err != nil && !plaintextRefusal(err):
		var rej *Rejection
		if errors.As(err, &rej) {
			// The plugin's own authentication now refuses what it
			// opened before.
			return local(fmt.Errorf("%w: plugin %s opened the welcome, then refused it: %v", ports.ErrAlgorithmUnavailable, name, err))
		}
		return err // held or local: the plugin failed this time
	case !bytes.Equal(first, r.hosted.digest()):
		return local(fmt.Errorf("%w: plugin %s returned different plaintexts for the same sealed welcome", ports.ErrAlgorithmUnavailable, name))
	}
	var hd *Hold
	if errors.As(cause, &hd) {
		return &Hold{Kind: hd.Kind, Rule: hd.Rule, Err: fmt.Errorf("%w (the plaintext came from plugin %s, which may be at fault)", hd.Err, name)}
	}
	var rej *Rejection
	errors.As(cause, &rej)
	return &Hold{Kind: HoldUnreadable, Rule: "JOIN-087",
		Err: fmt.Errorf("the plaintext plugin %s returned cannot be read (%s: %v); the plugin may be at fault", name, rej.Rule, rej.Err)}
}
