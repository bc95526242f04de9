package delivery

import (
	"bytes"
	"container/list"
	"context"
	"sync"
	"time"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// stateCacheBytes bounds the encoded public states [cachingStates] keeps
// (COMP-404).
const stateCacheBytes = 16 << 20

// viewerStateMaxAge is how old a cached state the viewer rule (COMP-403)
// may judge by; older, it reads the store.
const viewerStateMaxAge = time.Second

// cachingStates is a [ports.PublicStateStore] that keeps the newest
// public state of each group this service read or wrote, least recently
// used out (COMP-404), so that a commit does not read its group's state
// from the database before it is validated. A cached state may be behind
// the database when another process sharing it advanced the group; that
// is safe because AppendWithState checks every advance's expectation in
// its transaction (a stale start fails with [ports.ErrStateMoved], which
// drops the group here and makes the batch be validated again), and
// [Service.acceptChecked] validates a refused batch again from the
// database before refusing it.
type cachingStates struct {
	ports.PublicStateStore
	now   func() time.Time
	mu    sync.Mutex
	size  int
	order *list.List // of *cachedState, most recently used first
	by    map[string]*list.Element
}

type cachedState struct {
	st ports.StoredPublicState
	at time.Time // when it was read or written
}

func newCachingStates(store ports.PublicStateStore) *cachingStates {
	return &cachingStates{PublicStateStore: store, now: time.Now, order: list.New(), by: map[string]*list.Element{}}
}

// PublicState returns the cached state, else the store's (and caches it).
func (c *cachingStates) PublicState(ctx context.Context, groupID []byte) (ports.StoredPublicState, error) {
	return c.recent(ctx, groupID, -1)
}

// recent is PublicState with a cached state no older than maxAge
// (negative: any age).
func (c *cachingStates) recent(ctx context.Context, groupID []byte, maxAge time.Duration) (ports.StoredPublicState, error) {
	c.mu.Lock()
	if el, ok := c.by[string(groupID)]; ok {
		e := el.Value.(*cachedState)
		if maxAge < 0 || c.now().Sub(e.at) <= maxAge {
			c.order.MoveToFront(el)
			c.mu.Unlock()
			return e.st, nil
		}
	}
	c.mu.Unlock()
	st, err := c.PublicStateStore.PublicState(ctx, groupID)
	if err == nil {
		c.put(st, true)
	}
	return st, err
}

// AppendWithState stores through the store and then caches the states it
// wrote; on any error it drops the advances' groups.
func (c *cachingStates) AppendWithState(ctx context.Context, envs []ports.NewStoredEnvelope, advances []ports.PublicStateAdvance) ([]uint64, error) {
	ids, err := c.PublicStateStore.AppendWithState(ctx, envs, advances)
	if err != nil {
		for _, a := range advances {
			c.drop(a.GroupID)
		}
		return ids, err
	}
	for _, a := range advances {
		if st, ok := c.after(a, envs, ids); ok {
			c.put(st, false)
		} else {
			c.drop(a.GroupID)
		}
	}
	return ids, nil
}

// after is the state the store holds once advance a of the batch is
// written, as [ports.PublicStateAdvance] defines it; ok is false when it
// depends on what is not cached.
func (c *cachingStates) after(a ports.PublicStateAdvance, envs []ports.NewStoredEnvelope, ids []uint64) (ports.StoredPublicState, bool) {
	c.mu.Lock()
	var prev *ports.StoredPublicState
	if el, ok := c.by[string(a.GroupID)]; ok {
		st := el.Value.(*cachedState).st
		prev = &st
	}
	c.mu.Unlock()
	var st ports.StoredPublicState
	switch {
	case a.Pending != nil: // two phases: the current state stays, the new one waits in the pending slot
		if prev == nil || a.GroupInfo >= 0 {
			return st, false
		}
		return *prev, true
	case a.State == nil: // a GroupInfo of the current epoch only
		if prev == nil {
			return st, false
		}
		st = *prev
	case a.Register:
		st = ports.StoredPublicState{GroupID: bytes.Clone(a.GroupID)}
	default:
		if prev == nil {
			return st, false
		}
		st = ports.StoredPublicState{GroupID: prev.GroupID, GroupInfoSeq: prev.GroupInfoSeq}
	}
	if a.State != nil {
		st.Epoch, st.State = a.Epoch, a.State
		if a.Commit >= 0 {
			st.CommitSeq, st.CommitDigest = ids[a.Commit], envs[a.Commit].DedupKey
		}
	}
	if a.GroupInfo >= 0 {
		st.GroupInfoSeq = ids[a.GroupInfo]
	}
	return st, true
}

// put caches st; read marks a state read from the store, which does not
// replace a newer epoch cached meanwhile.
func (c *cachingStates) put(st ports.StoredPublicState, read bool) {
	if len(st.State) > stateCacheBytes/4 {
		c.drop(st.GroupID)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.by[string(st.GroupID)]; ok {
		e := el.Value.(*cachedState)
		if read && e.st.Epoch > st.Epoch {
			return
		}
		c.size += len(st.State) - len(e.st.State)
		e.st, e.at = st, c.now()
		c.order.MoveToFront(el)
	} else {
		c.by[string(st.GroupID)] = c.order.PushFront(&cachedState{st: st, at: c.now()})
		c.size += len(st.State)
	}
	for c.size > stateCacheBytes {
		old := c.order.Back()
		e := old.Value.(*cachedState)
		c.order.Remove(old)
		delete(c.by, string(e.st.GroupID))
		c.size -= len(e.st.State)
	}
}

// drop forgets the group's state and reports whether one was cached.
func (c *cachingStates) drop(groupID []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.by[string(groupID)]
	if ok {
		c.order.Remove(el)
		delete(c.by, string(groupID))
		c.size -= len(el.Value.(*cachedState).st.State)
	}
	return ok
}

// acceptChecked is [Service.accept] that validates a batch it refuses
// once more from the database when a state it started from was cached:
// a cached state behind the database (another process advanced the
// group) must not refuse a commit the current state accepts.
func (s *Service) acceptChecked(ctx context.Context, envs []*backendpb.ClientEnvelope, rows []ports.NewStoredEnvelope) ([]ports.PublicStateAdvance, error) {
	adv, err := s.accept(ctx, envs, rows)
	c, ok := s.states.(*cachingStates)
	if err == nil || !ok {
		return adv, err
	}
	again := false
	for _, env := range envs {
		if k := ports.TopicKind(env.GetTargetTopic()[0]); k == ports.TopicGroupMessages || k == ports.TopicGroupInfo {
			again = c.drop(env.GetTargetTopic()[1:]) || again
		}
	}
	if !again {
		return adv, err
	}
	return s.accept(ctx, envs, rows)
}
