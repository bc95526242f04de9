package client

import (
	"bytes"
	"sync"

	"github.com/regroup-mls/regroup/ports"
)

// maxJunk bounds the refused envelopes a group's junk holds (COMP-241).
const maxJunk = 4096

// deferred is an envelope past a group's cursor that the client could not
// authenticate (COMP-240): no MLS message (mls false), or one the engine
// refused with err.
type deferred struct {
	e      *envelope
	h      header
	mls    bool
	before ports.GroupView
	err    error
}

// junk is what a group's passes read past its cursor without
// authenticating it, in sequence order. Nothing authenticated stands
// between the cursor and any of it, so the group's state is the same for
// all of it: view, the state after the cursor, is kept once.
type junk struct {
	cursor uint64
	view   ports.GroupView
	items  []deferred
}

func (j *junk) clone() *junk {
	n := *j
	n.items = append([]deferred(nil), j.items...)
	return &n
}

// has reports whether e was refused before, unchanged.
func (j *junk) has(e *envelope) bool {
	for i := range j.items {
		if d := j.items[i]; d.e.seq == e.seq {
			return bytes.Equal(d.e.payload, e.payload)
		}
	}
	return false
}

func (j *junk) add(d deferred) {
	if !d.mls {
		return // nothing will be recorded for it: the read position is enough
	}
	if len(j.items) == 0 {
		j.view = d.before
	}
	if len(j.items) >= maxJunk {
		return // past the bound a refusal is never recorded (COMP-241)
	}
	d.before = ports.GroupView{}
	j.items = append(j.items, d)
}

// before returns the refusals below seq, each with the state it was
// refused in.
func (j *junk) before(seq uint64) []deferred {
	var out []deferred
	for _, d := range j.items {
		if d.e.seq < seq {
			d.before = j.view
			out = append(out, d)
		}
	}
	return out
}

// reset empties the junk at an authenticated envelope at seq: what was
// below it is recorded by then, and what was above it (ids the delivery
// service placed ahead of an envelope it served later) is read again in
// the new state.
func (j *junk) reset(seq uint64) {
	*j = junk{cursor: seq}
}

// junkByGroup holds each group's junk between passes, in memory.
type junkByGroup struct {
	mu sync.Mutex
	m  map[string]*junk
}

// take returns the group's junk at cursor, empty when none is held or
// what is held was read past another cursor.
func (b *junkByGroup) take(key string, cursor uint64) *junk {
	b.mu.Lock()
	defer b.mu.Unlock()
	if j, ok := b.m[key]; ok && j.cursor == cursor {
		return j
	}
	return &junk{cursor: cursor}
}

// put keeps the group's junk for the next pass; empty junk is dropped, so
// the map holds only groups with junk past their cursor.
func (b *junkByGroup) put(key string, j *junk) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(j.items) == 0 {
		delete(b.m, key)
		return
	}
	if b.m == nil {
		b.m = map[string]*junk{}
	}
	b.m[key] = j
}
