package mls

import (
	"container/list"
	"crypto/sha256"
	"sync"

	"github.com/regroup-mls/regroup/adapters/mls/group"
)

// publicCache keeps decoded public states by the SHA-256 digest of their
// encoding, least recently used first out, within a bound on the encoded
// size of the states it holds (COMP-312). A state is a pure function of
// its bytes, so a hit is always the state the caller passed: nothing is
// ever invalidated, entries only age out.
type publicCache struct {
	mu    sync.Mutex
	max   int
	size  int
	order *list.List // of *publicEntry, most recently used first
	byKey map[[sha256.Size]byte]*list.Element
}

// publicEntry is one decoded state. Its group is read while mu is held:
// package group's trees fill hash caches on reads, and a state that
// several calls share is never changed otherwise.
type publicEntry struct {
	key  [sha256.Size]byte
	size int
	mu   sync.Mutex
	g    *group.Group
}

// newPublicCache returns a cache of at most max bytes of encoded state
// (DefaultPublicCacheBytes when 0); with max negative it keeps nothing.
func newPublicCache(max int) *publicCache {
	if max == 0 {
		max = DefaultPublicCacheBytes
	}
	return &publicCache{max: max, order: list.New(), byKey: map[[sha256.Size]byte]*list.Element{}}
}

// get returns the entry of state, nil when not held.
func (c *publicCache) get(state []byte) *publicEntry {
	if c.max < 0 {
		return nil
	}
	k := sha256.Sum256(state)
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[k]
	if !ok {
		return nil
	}
	c.order.MoveToFront(el)
	return el.Value.(*publicEntry)
}

// put holds g as the decoding of state and returns its entry (also when
// the cache keeps nothing, for the caller's own use).
func (c *publicCache) put(state []byte, g *group.Group) *publicEntry {
	e := &publicEntry{g: g, size: len(state)}
	if c.max < 0 || len(state) > c.max {
		return e
	}
	e.key = sha256.Sum256(state)
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[e.key]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*publicEntry)
	}
	c.byKey[e.key] = c.order.PushFront(e)
	c.size += e.size
	for c.size > c.max {
		old := c.order.Back()
		oe := old.Value.(*publicEntry)
		c.order.Remove(old)
		delete(c.byKey, oe.key)
		c.size -= oe.size
	}
	return e
}
