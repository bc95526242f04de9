// Package readpos keeps the read position of a topic whose sequence ids
// the delivery service assigns and the client cannot authenticate
// (COMP-240).
//
// A topic has two positions. The durable one is stored and moves only
// over envelopes the reader authenticated (an MLS message its group
// processed, a commit-log entry that verified, a Welcome that opened
// under one of the installation's keys), or up to an id below one it
// authenticated. An envelope at an id the operator chose — 2^63−1, say —
// therefore cannot move it past honest envelopes that arrive later with
// lower ids. The read position of a pass moves over everything read, so a
// pass never reads an envelope twice.
//
// Between passes a [Tracker] remembers, in memory, the run of
// unauthenticated envelopes the last pass read past the durable position.
// The next pass reads from the durable position, so an honest envelope
// with an id below the run comes first (a page is in id order), and once
// it reaches the run it jumps to the run's end. A pass re-reads at most
// one page of junk it has seen, and reads at most [Budget] envelopes of
// new junk before it ends, so neither a flood nor a restart makes a pass
// unbounded. After a restart the memory is empty and the junk past the
// durable position is read once again.
package readpos

import "sync"

// Budget bounds the unauthenticated envelopes one pass reads past the
// durable position before it ends; the next pass goes on from there.
const Budget = 512

// Tracker remembers, per topic, the run of unauthenticated envelopes the
// last pass read past the durable position. The zero value is ready to
// use; it is safe for concurrent use.
type Tracker struct {
	mu sync.Mutex
	m  map[string]mark
}

// mark is a run of junk: every envelope read with an id from from to
// readTo was unauthenticated. sums, when the reader gives them, are the
// digests of the junk read, by id (at most maxSums).
type mark struct {
	from, readTo uint64
	sums         map[uint64][32]byte
}

// maxSums bounds the junk digests a run keeps.
const maxSums = 1024

// ReadTo returns how far the passes of this process read the topic named
// key past its durable position, junk included: every envelope up to it
// was read and evaluated. It is 0 when they read no junk past the durable
// position, which is then as far as they read.
func (t *Tracker) ReadTo(key string) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[key].readTo
}

// Forget drops what the passes remembered of the topic named key: its
// durable position moved back, and the ids past it mean something else
// now.
func (t *Tracker) Forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, key)
}

// Pass is one read pass over a topic.
type Pass struct {
	t       *Tracker
	key     string
	durable uint64
	pos     uint64
	// run is the junk run known from the last pass, zero when none; the
	// pass jumps over it once it reaches it.
	run mark
	// first is the first junk id read after the last authenticated one.
	first uint64
	junk  int
	// sums are the digests of the junk this pass read (ReadSum).
	sums map[uint64][32]byte
}

// Start begins a pass over the topic named key whose durable position is
// durable. A junk run the last pass read is remembered while it lies
// above the durable position, even when envelopes authenticated below it
// moved that position since.
func (t *Tracker) Start(key string, durable uint64) *Pass {
	p := &Pass{t: t, key: key, durable: durable, pos: durable}
	t.mu.Lock()
	if m, ok := t.m[key]; ok && m.from > durable {
		p.run = m
	}
	t.mu.Unlock()
	return p
}

// Known reports whether a previous pass read the envelope at seq, with
// digest sum, as junk: the reader need not evaluate it again. An envelope
// inside the remembered run whose digest differs — the delivery service
// now serves something else at that id — is not known, and when the
// reader reads it the run is forgotten, so the pass does not jump over
// what replaced the junk.
func (p *Pass) Known(seq uint64, sum [32]byte) bool {
	if p.run.from == 0 || seq < p.run.from || seq > p.run.readTo {
		return false
	}
	old, ok := p.run.sums[seq]
	return ok && old == sum
}

// ReadSum is Read for a reader that identifies junk by its digest (see
// [Pass.Known]).
func (p *Pass) ReadSum(seq uint64, authenticated bool, sum [32]byte) {
	if seq <= p.pos {
		return
	}
	if p.run.from != 0 && seq >= p.run.from && seq <= p.run.readTo && !p.Known(seq, sum) {
		p.run = mark{} // the run changed under us: read it again
	}
	p.Read(seq, authenticated)
	if !authenticated {
		if p.sums == nil {
			p.sums = map[uint64][32]byte{}
		}
		if len(p.sums) < maxSums {
			p.sums[seq] = sum
		}
	}
}

// Pos returns the position to query the next page after.
func (p *Pass) Pos() uint64 { return p.pos }

// Read records that the pass read an envelope at seq (above Pos);
// authenticated says whether the reader authenticated it. An
// authenticated envelope inside the remembered run ends it: the run is
// read again.
func (p *Pass) Read(seq uint64, authenticated bool) {
	if seq <= p.pos {
		return
	}
	p.pos = seq
	if !authenticated {
		if p.first == 0 {
			p.first = seq
		}
		p.junk++
		return
	}
	p.durable, p.first, p.junk = seq, 0, 0
	for id := range p.sums {
		if id <= seq {
			delete(p.sums, id)
		}
	}
	if p.run.from != 0 && seq >= p.run.from {
		p.run = mark{}
	}
}

// Durable returns the durable position: the last authenticated envelope's
// id, or the position the pass started from.
func (p *Pass) Durable() uint64 { return p.durable }

// EndPage ends a page and reports whether the pass goes on: false when
// the page read nothing new, or when the pass has read its budget of
// junk. A pass that reached the remembered junk run jumps to its end.
func (p *Pass) EndPage(readAny bool) bool {
	if p.run.from != 0 && p.pos >= p.run.from && p.run.readTo > p.pos {
		if p.first == 0 || p.first > p.run.from {
			p.first = p.run.from
		}
		p.pos, readAny = p.run.readTo, true
		p.run = mark{}
	}
	if !readAny || p.junk >= Budget {
		p.save()
		return false
	}
	return true
}

// End records where the pass stopped, for the next one. A pass that ends
// on an error calls it too: what it read stays read.
func (p *Pass) End() { p.save() }

func (p *Pass) save() {
	p.t.mu.Lock()
	defer p.t.mu.Unlock()
	m := mark{from: p.first, readTo: p.pos, sums: p.sums}
	if p.run.from != 0 && p.run.readTo > m.readTo {
		m = p.run // not reached this pass: still ahead
	} else if p.run.from != 0 && len(p.run.sums) > 0 {
		// The jumped-over run stays junk: keep its digests beside this
		// pass's.
		for id, sum := range p.run.sums {
			if len(m.sums) >= maxSums {
				break
			}
			if m.sums == nil {
				m.sums = map[uint64][32]byte{}
			}
			if _, ok := m.sums[id]; !ok && id > p.durable {
				m.sums[id] = sum
			}
		}
	}
	if m.from == 0 || m.readTo <= p.durable {
		delete(p.t.m, p.key)
		return
	}
	if p.t.m == nil {
		p.t.m = map[string]mark{}
	}
	p.t.m[p.key] = m
}
