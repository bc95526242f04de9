package client

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// The message path shares its costs between concurrent sends (COMP-550):
// a send's catch-up is skipped when a catch-up of the same group began
// after the send was called and completed; the sends' transactions share
// the store's commits (a store with group commit does that by itself);
// their envelopes share publish calls (publisher); and the confirmations
// of their sequence ids, which a read of the topic can redo, commit
// without waiting for the disk (COMP-551).

// maxPublishBatch bounds the envelopes of one publish call the publisher
// makes, far below a delivery service's default limit per call.
const maxPublishBatch = 32

// publisher joins the envelopes that concurrent sends publish into one
// Publish call: one goroutine at a time takes everything queued and
// publishes it in one call, and each send gets its envelope's sequence
// id. A call the service refuses for what it holds is made again one
// envelope per call, so one bad envelope fails only its own send.
type publisher struct {
	mu      sync.Mutex
	queue   []*publishing
	running bool
}

// publishing is one send's envelope waiting to be published.
type publishing struct {
	ctx  context.Context
	env  *backendpb.ClientEnvelope
	done chan published
}

type published struct {
	seq uint64
	err error
}

// publish publishes env, possibly in one call with the envelopes of
// concurrent sends, and returns its sequence id. When ctx ends before
// the outcome is known, the outcome is unknown, as with any publish
// whose call was cut short: the outbox holds the message (COMP-188).
func (c *Client) publish(ctx context.Context, env *backendpb.ClientEnvelope) (uint64, error) {
	p := &publishing{ctx: ctx, env: env, done: make(chan published, 1)}
	q := &c.pub
	q.mu.Lock()
	q.queue = append(q.queue, p)
	if !q.running {
		q.running = true
		go c.runPublishes()
	}
	q.mu.Unlock()
	select {
	case r := <-p.done:
		return r.seq, r.err
	case <-ctx.Done():
		q.mu.Lock()
		for i, w := range q.queue {
			if w == p {
				q.queue = append(q.queue[:i], q.queue[i+1:]...)
				break
			}
		}
		q.mu.Unlock()
		return 0, ctx.Err()
	}
}

// runPublishes publishes what is queued until the queue is empty.
func (c *Client) runPublishes() {
	q := &c.pub
	for {
		q.mu.Lock()
		n := min(len(q.queue), maxPublishBatch)
		if n == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		batch := append([]*publishing(nil), q.queue[:n]...)
		q.queue = append(q.queue[:0], q.queue[n:]...)
		q.mu.Unlock()
		c.publishBatch(batch)
	}
}

// publishBatch makes one Publish call for batch, under a context that
// ends when every sender's context has ended.
func (c *Client) publishBatch(batch []*publishing) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(batch[0].ctx))
	defer cancel()
	var waiting atomic.Int64
	waiting.Store(int64(len(batch)))
	for _, p := range batch {
		stop := context.AfterFunc(p.ctx, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	envs := make([]*backendpb.ClientEnvelope, len(batch))
	for i, p := range batch {
		envs[i] = p.env
	}
	seqs, err := publishRetry(ctx, c.deps.Transport, envs)
	if err != nil && len(batch) > 1 && errors.Is(err, ports.ErrInvalidArgument) {
		for _, p := range batch {
			s, err := publishRetry(ctx, c.deps.Transport, []*backendpb.ClientEnvelope{p.env})
			r := published{err: err}
			if err == nil {
				r.seq = s[0]
			}
			p.done <- r
		}
		return
	}
	for i, p := range batch {
		if err != nil {
			p.done <- published{err: err}
		} else {
			p.done <- published{seq: seqs[i]}
		}
	}
}

// catchups counts, per group, the catch-up passes sends start and the
// last that completed, so that a send skips its own when one that began
// after the send was called has completed: that pass saw everything the
// send's own would have (COMP-550).
type catchups struct {
	mu     sync.Mutex
	groups map[string]*catchup
}

type catchup struct {
	started, lastOK uint64
}

// sendCatchUp processes the group's topic for a send called when ticket was
// taken, unless a pass that began after it completed.
func (c *Client) sendCatchUp(ctx context.Context, groupID []byte) error {
	cu := c.catchups.of(groupID)
	c.catchups.mu.Lock()
	ticket := cu.started
	c.catchups.mu.Unlock()
	unlock := c.lock(groupID)
	defer unlock()
	c.catchups.mu.Lock()
	if cu.lastOK > ticket {
		c.catchups.mu.Unlock()
		return nil
	}
	cu.started++
	n := cu.started
	c.catchups.mu.Unlock()
	if err := c.processGroup(ctx, groupID); err != nil {
		return err
	}
	c.catchups.mu.Lock()
	cu.lastOK = max(cu.lastOK, n)
	c.catchups.mu.Unlock()
	return nil
}

func (cs *catchups) of(groupID []byte) *catchup {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.groups == nil {
		cs.groups = map[string]*catchup{}
	}
	cu, ok := cs.groups[string(groupID)]
	if !ok {
		cu = &catchup{}
		cs.groups[string(groupID)] = cu
	}
	return cu
}

// ownSent remembers the payload hashes and sequence ids of the messages
// this process sent and confirmed, until its reading of the topic passes
// them. A batch of the topic made only of those changes nothing but the
// read position, which a later read redoes: its transaction is relaxed
// (COMP-551). The memory is a hint, bounded; forgetting costs only a
// durable commit.
type ownSent struct {
	mu   sync.Mutex
	seqs map[[sha256.Size]byte]uint64
}

// maxOwnSent bounds the messages ownSent remembers.
const maxOwnSent = 4096

func (o *ownSent) add(hash []byte, seq uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seqs == nil || len(o.seqs) >= maxOwnSent {
		o.seqs = map[[sha256.Size]byte]uint64{}
	}
	o.seqs[[sha256.Size]byte(hash)] = seq
}

// only reports whether every envelope of batch is a message ownSent
// remembers, at its confirmed sequence id.
func (o *ownSent) only(batch []*envelope) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range batch {
		if e.notice != nil || len(e.payload) == 0 {
			return false
		}
		if seq, ok := o.seqs[sha256.Sum256(e.payload)]; !ok || seq != e.seq {
			return false
		}
	}
	return true
}

// forget drops the envelopes of batch, which a committed read passed.
func (o *ownSent) forget(batch []*envelope) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.seqs) == 0 {
		return
	}
	for _, e := range batch {
		delete(o.seqs, sha256.Sum256(e.payload))
	}
}

// txRelaxed is tx with a commit that need not wait for the disk, on a
// store that offers it ([ports.RelaxedStore]); only for writes a read of
// the topic redoes (COMP-551).
func (c *Client) txRelaxed(ctx context.Context, fn func(ctx context.Context, tx ports.Tx) error) error {
	rs, ok := c.deps.Store.(ports.RelaxedStore)
	if !ok {
		return c.tx(ctx, fn)
	}
	return rs.TxRelaxed(ctx, func(tx ports.Tx) error { return fn(ctx, tx) })
}
