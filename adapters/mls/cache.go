package mls

import (
	"container/list"
	"sync"

	"github.com/regroup-mls/regroup/adapters/mls/group"
)

// DefaultCacheBytes is the default bound of an engine's state cache, in
// bytes of stored state; decoded, a state takes about three times its
// stored size in memory. 8 MiB holds some forty states of a 1,000-member
// group, or thousands of small ones.
const DefaultCacheBytes = 8 << 20

// stateCache keeps decoded group states by the tag of the write that
// stored them, least recently used first out, within a bound on the
// stored size of the states it holds.
//
// # Why a hit is always the stored state
//
// Every write of a state draws a fresh random tag (group.TagSize bytes)
// and stores it in the state's head; the cache holds a state only under
// the tag it was written or read with. An engine reads the head from the
// caller's transaction first and asks the cache for that head's tag, so a
// hit is exactly the state the transaction sees: a write rolled back, a
// transaction retried (its writes draw new tags), a write by another
// transaction not yet visible, another Engine value or another process on
// the same store — each leaves the cache holding states under tags the
// store may or may not show, and only a tag the store shows is ever
// served. Nothing needs invalidating: entries age out, and the entry of a
// staged Welcome is dropped once it is installed.
//
// A staged Welcome's entry also holds the parts its state is stored as
// (views of the staged blob, counted, as every entry, by the state's
// stored size): InstallWelcome stores them as the group's state after
// reading no more of the blob than its header, whose tag names the entry
// (COMP-573, COMP-574).
//
// A cached state is shared: it is never changed, and whoever takes one
// clones it ([group.Group.Clone]) before using it.
type stateCache struct {
	mu    sync.Mutex
	max   int
	size  int
	order *list.List // of *cacheEntry, most recently used first
	byKey map[cacheKey]*list.Element
}

// cacheKey names one written state: a blob namespace and key (a group, or
// a staged Welcome's handle) and the write's tag.
type cacheKey struct {
	ns, key string
	tag     [group.TagSize]byte
}

type cacheEntry struct {
	k cacheKey
	g *group.Group
	// sp, when not nil, is the parts g was stored as under k (a staged
	// Welcome's, which InstallWelcome stores as the group's state).
	sp   *group.Split
	size int
}

// newStateCache returns a cache of at most max bytes of stored state; nil
// (no cache) when max is negative.
func newStateCache(max int) *stateCache {
	if max < 0 {
		return nil
	}
	if max == 0 {
		max = DefaultCacheBytes
	}
	return &stateCache{max: max, order: list.New(), byKey: map[cacheKey]*list.Element{}}
}

func newCacheKey(ns, key string, tag []byte) cacheKey {
	k := cacheKey{ns: ns, key: key}
	copy(k.tag[:], tag)
	return k
}

// get returns the state written under k, nil when not held. The caller
// must not change it.
func (c *stateCache) get(k cacheKey) *group.Group {
	g, _ := c.getSplit(k)
	return g
}

// getSplit returns the state written under k, nil when not held, and the
// parts it was stored as when the cache holds them too. The caller must
// not change either.
func (c *stateCache) getSplit(k cacheKey) (*group.Group, *group.Split) {
	if c == nil {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[k]
	if !ok {
		return nil, nil
	}
	c.order.MoveToFront(el)
	e := el.Value.(*cacheEntry)
	return e.g, e.sp
}

// put holds g as the state written under k, size bytes when stored; g
// must not change afterwards.
func (c *stateCache) put(k cacheKey, g *group.Group, size int) { c.putSplit(k, g, nil, size) }

// putSplit is put that also holds sp, the parts g was stored as under k
// (nil for none); neither may change afterwards.
func (c *stateCache) putSplit(k cacheKey, g *group.Group, sp *group.Split, size int) {
	if c == nil || size > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[k]; ok {
		c.order.MoveToFront(el)
		if e := el.Value.(*cacheEntry); e.sp == nil {
			e.sp = sp
		}
		return
	}
	c.byKey[k] = c.order.PushFront(&cacheEntry{k: k, g: g, sp: sp, size: size})
	c.size += size
	c.evict()
}

// drop forgets the state written under k: a later read of that write
// decodes it again.
func (c *stateCache) drop(k cacheKey) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[k]; ok {
		c.remove(el)
	}
}

// evict drops the least recently used states until the cache is within
// its bound.
func (c *stateCache) evict() {
	for c.size > c.max {
		c.remove(c.order.Back())
	}
}

func (c *stateCache) remove(el *list.Element) {
	e := el.Value.(*cacheEntry)
	c.order.Remove(el)
	delete(c.byKey, e.k)
	c.size -= e.size
}
