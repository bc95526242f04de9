// Package secrettree implements the secret tree and the per-sender hash
// ratchets of RFC 9420 §9, which give every message of an epoch its own
// AEAD key and nonce.
//
// # Forward secrecy
//
// Following §9.2, a [Tree] keeps only what it still needs. A node secret is
// erased (overwritten, then dropped) as soon as both child secrets are
// derived, a leaf secret as soon as its two ratchets exist, and a ratchet
// secret as soon as the next one is derived. Keys of generations skipped
// over are kept, up to a bounded window, until they are used; a key is
// erased once it has decrypted a message.
//
// # Window
//
// [Options.MaxSkip] bounds how many generations a receiver may jump ahead
// in one step and [Options.MaxStored] how many skipped keys a ratchet keeps
// (the oldest are dropped first). A generation too far ahead is
// [ErrGenerationTooFar]; one already used, or dropped, is [ErrGenerationUsed].
//
// # Concurrency
//
// A Tree is not safe for concurrent use; the group engine serialises access.
package secrettree

import (
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/treemath"
)

// Sentinel errors.
var (
	// ErrLeafOutOfRange means the leaf is not in the tree.
	ErrLeafOutOfRange = errors.New("secrettree: leaf out of range")
	// ErrGenerationUsed means the generation's key was already used or
	// erased (including keys dropped from the window).
	ErrGenerationUsed = errors.New("secrettree: generation already used or erased")
	// ErrGenerationTooFar means the generation is beyond the window.
	ErrGenerationTooFar = errors.New("secrettree: generation beyond the skip window")
	// ErrExhausted means the ratchet reached the last uint32 generation.
	ErrExhausted = errors.New("secrettree: ratchet exhausted")
)

// RatchetType selects the handshake or the application ratchet of a leaf.
type RatchetType uint8

// Ratchet types.
const (
	Handshake RatchetType = iota
	Application
)

// Default window sizes.
const (
	DefaultMaxSkip   = 1024
	DefaultMaxStored = 1024
)

// Options bounds the window for out-of-order messages. Zero fields take the
// defaults.
type Options struct {
	// MaxSkip is how many generations beyond the next expected one a
	// receiver may jump in one step.
	MaxSkip uint32
	// MaxStored is how many skipped keys one ratchet keeps.
	MaxStored int
}

// KeyNonce is the AEAD key and nonce of one generation of a ratchet.
type KeyNonce struct {
	Generation uint32
	Key        []byte
	Nonce      []byte
}

func (k *KeyNonce) erase() {
	clear(k.Key)
	clear(k.Nonce)
}

// Tree is the secret tree of one epoch.
type Tree struct {
	suite    *ciphersuite.Suite
	leaves   treemath.LeafCount
	opts     Options
	nodes    map[treemath.NodeIndex][]byte
	ratchets map[ratchetID]*ratchet
}

type ratchetID struct {
	leaf treemath.LeafIndex
	typ  RatchetType
}

// New returns the secret tree of an epoch with the given number of leaves,
// rooted at encryption_secret.
func New(s *ciphersuite.Suite, encryptionSecret []byte, leaves uint32, opts *Options) (*Tree, error) {
	root, ok := treemath.Root(treemath.LeafCount(leaves))
	if !ok {
		return nil, fmt.Errorf("%w: tree of %d leaves", ErrLeafOutOfRange, leaves)
	}
	if len(encryptionSecret) != s.HashSize() {
		return nil, fmt.Errorf("%w: encryption secret of %d bytes", ciphersuite.ErrInvalidKey, len(encryptionSecret))
	}
	t := &Tree{
		suite: s, leaves: treemath.LeafCount(leaves),
		nodes:    map[treemath.NodeIndex][]byte{root: append([]byte(nil), encryptionSecret...)},
		ratchets: map[ratchetID]*ratchet{},
	}
	if opts != nil {
		t.opts = *opts
	}
	if t.opts.MaxSkip == 0 {
		t.opts.MaxSkip = DefaultMaxSkip
	}
	if t.opts.MaxStored <= 0 {
		t.opts.MaxStored = DefaultMaxStored
	}
	return t, nil
}

// Leaves returns the number of leaves of the tree.
func (t *Tree) Leaves() uint32 { return uint32(t.leaves) }

// leafSecret derives the secret of leaf l from its lowest stored ancestor,
// erasing every parent secret on the way once both children exist. The
// returned secret is removed from the tree.
func (t *Tree) leafSecret(l treemath.LeafIndex) ([]byte, error) {
	x := l.Node()
	path := []treemath.NodeIndex{x}
	for _, p := range treemath.DirectPath(x, t.leaves) {
		if _, ok := t.nodes[path[len(path)-1]]; ok {
			break
		}
		path = append(path, p)
	}
	top := path[len(path)-1]
	if _, ok := t.nodes[top]; !ok {
		return nil, fmt.Errorf("%w: leaf %d secret already consumed", ErrGenerationUsed, l)
	}
	for i := len(path) - 1; i > 0; i-- {
		p := path[i]
		if err := t.split(p); err != nil {
			return nil, err
		}
	}
	sec := t.nodes[x]
	delete(t.nodes, x)
	return sec, nil
}

// split replaces the secret of parent p by the secrets of its children.
func (t *Tree) split(p treemath.NodeIndex) error {
	sec := t.nodes[p]
	l, _ := treemath.Left(p)
	r, _ := treemath.Right(p, t.leaves)
	ls, err := t.suite.ExpandWithLabel(sec, "tree", []byte("left"), t.suite.HashSize())
	if err != nil {
		return err
	}
	rs, err := t.suite.ExpandWithLabel(sec, "tree", []byte("right"), t.suite.HashSize())
	if err != nil {
		return err
	}
	t.nodes[l], t.nodes[r] = ls, rs
	clear(sec)
	delete(t.nodes, p)
	return nil
}

// ratchetFor returns the ratchet of (leaf, typ), creating both ratchets of
// the leaf on first use.
func (t *Tree) ratchetFor(leaf uint32, typ RatchetType) (*ratchet, error) {
	if leaf >= uint32(t.leaves) {
		return nil, fmt.Errorf("%w: leaf %d of %d", ErrLeafOutOfRange, leaf, t.leaves)
	}
	if typ != Handshake && typ != Application {
		return nil, fmt.Errorf("secrettree: unknown ratchet type %d", typ)
	}
	l := treemath.LeafIndex(leaf)
	if r, ok := t.ratchets[ratchetID{l, typ}]; ok {
		return r, nil
	}
	sec, err := t.leafSecret(l)
	if err != nil {
		return nil, err
	}
	defer clear(sec)
	for _, rt := range []RatchetType{Handshake, Application} {
		label := "handshake"
		if rt == Application {
			label = "application"
		}
		s, err := t.suite.ExpandWithLabel(sec, label, nil, t.suite.HashSize())
		if err != nil {
			return nil, err
		}
		t.ratchets[ratchetID{l, rt}] = &ratchet{suite: t.suite, secret: s, skipped: map[uint32]*KeyNonce{}, opts: &t.opts}
	}
	return t.ratchets[ratchetID{l, typ}], nil
}

// Next returns the key and nonce of the next generation of (leaf, typ) for
// sending a message, and advances the ratchet: that key is handed out once.
func (t *Tree) Next(leaf uint32, typ RatchetType) (KeyNonce, error) {
	r, err := t.ratchetFor(leaf, typ)
	if err != nil {
		return KeyNonce{}, err
	}
	return r.next()
}

// Open finds the key of generation gen of (leaf, typ) for a received
// message and calls use with it. If use returns nil the key is erased;
// otherwise it stays available (a forged message cannot burn a key) and
// use's error is returned.
func (t *Tree) Open(leaf uint32, typ RatchetType, gen uint32, use func(KeyNonce) error) error {
	r, err := t.ratchetFor(leaf, typ)
	if err != nil {
		return err
	}
	kn, err := r.at(gen)
	if err != nil {
		return fmt.Errorf("leaf %d: %w", leaf, err)
	}
	if err := use(*kn); err != nil {
		return err
	}
	kn.erase()
	delete(r.skipped, gen)
	return nil
}
