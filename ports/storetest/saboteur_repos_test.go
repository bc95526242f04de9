package storetest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// sabState is what a saboteur keeps beside the store: caches that alias
// memory, and counters a careless adapter keeps in the process.
type sabState struct {
	mu      sync.Mutex
	blobs   map[string][]byte
	groups  map[string]ports.Group
	inboxes map[string]bool
	readPos map[string]uint64
	seq     map[string]uint64
	msgID   uint64
}

func newSabState() *sabState {
	return &sabState{blobs: map[string][]byte{}, groups: map[string]ports.Group{}, inboxes: map[string]bool{}, readPos: map[string]uint64{}}
}

// resetMemory forgets the counters a process keeps, as a restart does.
func (s *sabState) resetMemory() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq, s.msgID = map[string]uint64{}, 0
}

type sabStore struct {
	ports.Store
	rule   string
	st     *sabState
	closed atomic.Bool
}

func (s *sabStore) Close() error {
	s.closed.Store(true)
	return s.Store.Close()
}

func (s *sabStore) Tx(ctx context.Context, fn func(tx ports.Tx) error) (err error) {
	wrapped := func(tx ports.Tx) error { return fn(s.wrap(tx)) }
	switch s.rule {
	case "ignores-cancel":
		return s.Store.Tx(context.WithoutCancel(ctx), wrapped)
	case "tx-after-close":
		if s.closed.Load() {
			return nil
		}
	case "swallows-panic":
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("transaction panicked: %v", r)
			}
		}()
	}
	return s.Store.Tx(ctx, wrapped)
}

func (s *sabStore) wrap(tx ports.Tx) ports.Tx {
	t := sabTx{Tx: tx, rule: s.rule, st: s.st}
	if mt, ok := tx.(ports.MessageTx); ok && s.rule != "no-message-tx" {
		return sabMsgTx{t, mt}
	}
	return t
}

// sabTx hands out the sabotaged repositories; it has no Messages method,
// so a store that lost ports.MessageTx is this type alone.
type sabTx struct {
	ports.Tx
	rule string
	st   *sabState
}

type sabMsgTx struct {
	sabTx
	mt ports.MessageTx
}

func (t sabMsgTx) Messages() ports.Messages {
	return sabMessages{t.mt.Messages(), t.rule, t.st}
}

func (t sabTx) Groups() ports.Groups             { return sabGroups{t.Tx.Groups(), t.rule, t.st} }
func (t sabTx) KeyPackages() ports.KeyPackages   { return sabKeys{t.Tx.KeyPackages(), t.rule} }
func (t sabTx) HeldWelcomes() ports.HeldWelcomes { return sabWelcomes{t.Tx.HeldWelcomes(), t.rule} }
func (t sabTx) Readds() ports.Readds             { return sabReadds{t.Tx.Readds(), t.rule} }
func (t sabTx) IdentityCache() ports.IdentityCache {
	c := sabIdentity{t.Tx.IdentityCache(), t.rule, t.st}
	if b, ok := c.IdentityCache.(ports.IdentityCacheBatch); ok && strings.HasPrefix(t.rule, "identity-batch-") {
		return sabIdentityBatch{c, b}
	}
	return c
}
func (t sabTx) LocalCommitLog() ports.LocalCommitLog {
	return sabLocal{t.Tx.LocalCommitLog(), t.rule, t.st}
}
func (t sabTx) RemoteCommitLog() ports.RemoteCommitLog {
	return sabRemote{t.Tx.RemoteCommitLog(), t.rule, t.st}
}
func (t sabTx) Blobs() ports.Blobs { return sabBlobs{t.Tx.Blobs(), t.rule, t.st} }
func (t sabTx) ReaderAdmission() ports.ReaderAdmission {
	return sabAdmission{t.Tx.ReaderAdmission(), t.rule}
}
func (t sabTx) PublishProgress() ports.PublishProgress {
	return sabPublish{t.Tx.PublishProgress(), t.rule}
}

// wallClock keeps t's wall-clock reading and drops its offset, as a store
// that formats times without a zone does.
func wallClock(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// shortPage drops the last element of a page shorter than its limit, as an
// off-by-one in "fetch limit+1 to see whether more follow" does.
func shortPage[T any](page []T, limit int, on bool) []T {
	if on && limit > 0 && len(page) > 0 && len(page) < limit {
		return page[:len(page)-1]
	}
	return page
}

type sabGroups struct {
	ports.Groups
	rule string
	st   *sabState
}

func (g sabGroups) Insert(ctx context.Context, gr ports.Group) error {
	switch g.rule {
	case "identical-insert-ok":
		if old, err := g.Groups.Get(ctx, gr.ID); err == nil && fmt.Sprint(old) == fmt.Sprint(gr) {
			return nil
		}
	case "times-wall-clock":
		gr.CreatedAt, gr.UpdatedAt = wallClock(gr.CreatedAt), wallClock(gr.UpdatedAt)
	case "group-insert-keeps-caller-struct":
		g.st.mu.Lock()
		g.st.groups[string(gr.ID)] = gr // shares the caller's slices
		g.st.mu.Unlock()
	}
	return g.Groups.Insert(ctx, gr)
}

func (g sabGroups) Get(ctx context.Context, id []byte) (ports.Group, error) {
	if g.rule == "group-insert-keeps-caller-struct" {
		g.st.mu.Lock()
		cached, ok := g.st.groups[string(id)]
		g.st.mu.Unlock()
		if ok {
			return cached, nil
		}
	}
	return g.Groups.Get(ctx, id)
}

func (g sabGroups) Update(ctx context.Context, id []byte, fn func(*ports.Group) error) error {
	switch g.rule {
	case "update-keeps-fn-writes":
		var fnErr error
		if err := g.Groups.Update(ctx, id, func(gr *ports.Group) error { fnErr = fn(gr); return nil }); err != nil {
			return err
		}
		return fnErr
	case "update-moves-id":
		old, err := g.Groups.Get(ctx, id)
		if err != nil {
			return err
		}
		next := old
		if err := fn(&next); err != nil {
			return err
		}
		if !bytes.Equal(next.ID, id) {
			return g.Groups.Insert(ctx, next)
		}
	}
	return g.Groups.Update(ctx, id, fn)
}

func (g sabGroups) List(ctx context.Context, f ports.GroupFilter) ([]ports.Group, error) {
	if g.rule == "groups-filter-ignores-active" {
		f.Active = nil
	}
	gs, err := g.Groups.List(ctx, f)
	switch g.rule {
	case "groups-by-created":
		slices.SortStableFunc(gs, func(a, b ports.Group) int { return a.CreatedAt.Compare(b.CreatedAt) })
	case "groups-signed-bytes":
		slices.SortStableFunc(gs, func(a, b ports.Group) int { return slices.Compare(signed(a.ID), signed(b.ID)) })
	}
	return gs, err
}

func signed(b []byte) []int8 {
	out := make([]int8, len(b))
	for i, c := range b {
		out[i] = int8(c)
	}
	return out
}

type sabKeys struct {
	ports.KeyPackages
	rule string
}

func (k sabKeys) Insert(ctx context.Context, r ports.KeyPackageRecord) error {
	if k.rule == "times-wall-clock" {
		r.CreatedAt, r.NotAfter, r.PublishConfirmedAt = wallClock(r.CreatedAt), wallClock(r.NotAfter), wallClock(r.PublishConfirmedAt)
	}
	return k.KeyPackages.Insert(ctx, r)
}

func (k sabKeys) Update(ctx context.Context, ref []byte, fn func(*ports.KeyPackageRecord) error) error {
	err := k.KeyPackages.Update(ctx, ref, fn)
	if k.rule == "update-absent-unwrapped" && errors.Is(err, ports.ErrNotFound) {
		return fmt.Errorf("update key package: %v", err)
	}
	return err
}

func (k sabKeys) Destroy(ctx context.Context, ref []byte, at time.Time) error {
	err := k.KeyPackages.Destroy(ctx, ref, at)
	if k.rule == "destroy-absent-ok" && errors.Is(err, ports.ErrNotFound) {
		return nil
	}
	return err
}

func (k sabKeys) List(ctx context.Context) ([]ports.KeyPackageRecord, error) {
	rs, err := k.KeyPackages.List(ctx)
	if k.rule == "keypackages-by-ref" {
		slices.SortStableFunc(rs, func(a, b ports.KeyPackageRecord) int { return bytes.Compare(a.Ref, b.Ref) })
	}
	return rs, err
}

func (k sabKeys) ByWrapperPublicKey(ctx context.Context, pub []byte) (ports.KeyPackageRecord, error) {
	if k.rule == "bywrapper-first-record" {
		rs, err := k.KeyPackages.List(ctx)
		if err == nil && len(rs) > 0 {
			return rs[0], nil
		}
	}
	return k.KeyPackages.ByWrapperPublicKey(ctx, pub)
}

type sabWelcomes struct {
	ports.HeldWelcomes
	rule string
}

func (w sabWelcomes) Put(ctx context.Context, h ports.HeldWelcome) (bool, error) {
	switch w.rule {
	case "welcome-envelope-64k":
		if len(h.Envelope) > 65535 {
			h.Envelope = h.Envelope[:65535]
		}
	case "times-wall-clock":
		h.ServerTimestamp, h.FirstSeenAt, h.Deadline = wallClock(h.ServerTimestamp), wallClock(h.FirstSeenAt), wallClock(h.Deadline)
	}
	return w.HeldWelcomes.Put(ctx, h)
}

func (w sabWelcomes) List(ctx context.Context) ([]ports.HeldWelcome, error) {
	ws, err := w.HeldWelcomes.List(ctx)
	switch w.rule {
	case "welcomes-by-first-seen":
		slices.SortStableFunc(ws, func(a, b ports.HeldWelcome) int { return a.FirstSeenAt.Compare(b.FirstSeenAt) })
	case "welcomes-seq-as-text":
		slices.SortStableFunc(ws, func(a, b ports.HeldWelcome) int {
			return strings.Compare(strconv.FormatUint(a.SequenceID, 10), strconv.FormatUint(b.SequenceID, 10))
		})
	}
	return ws, err
}

func (w sabWelcomes) Count(ctx context.Context) (int, error) {
	n, err := w.HeldWelcomes.Count(ctx)
	if w.rule == "welcome-count-off" && n > 0 {
		n--
	}
	return n, err
}

type sabReadds struct {
	ports.Readds
	rule string
}

func (r sabReadds) ListRequested(ctx context.Context) ([]ports.ReaddStatus, error) {
	rs, err := r.Readds.ListRequested(ctx)
	if r.rule == "readds-by-key-first" {
		slices.SortStableFunc(rs, func(a, b ports.ReaddStatus) int { return bytes.Compare(a.InstallationKey, b.InstallationKey) })
	}
	return rs, err
}

func (r sabReadds) Upsert(ctx context.Context, g, key []byte, fn func(*ports.ReaddStatus) error) error {
	if r.rule != "upsert-from-zero" {
		return r.Readds.Upsert(ctx, g, key, fn)
	}
	return r.Readds.Upsert(ctx, g, key, func(s *ports.ReaddStatus) error {
		fresh := ports.ReaddStatus{GroupID: s.GroupID, InstallationKey: s.InstallationKey}
		err := fn(&fresh)
		*s = fresh
		return err
	})
}

type sabIdentity struct {
	ports.IdentityCache
	rule string
	st   *sabState
}

func (c sabIdentity) Put(ctx context.Context, r ports.IdentityUpdateRecord) (bool, error) {
	if c.rule == "identity-update-64k" && len(r.Update) > 65535 {
		r.Update = r.Update[:65535]
	}
	c.st.mu.Lock()
	c.st.inboxes[r.InboxID] = true
	c.st.mu.Unlock()
	return c.IdentityCache.Put(ctx, r)
}

// matching returns the inboxes seen that start with inbox, as a LIKE
// 'inbox%' lookup would.
func (c sabIdentity) matching(inbox string) []string {
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	var out []string
	for i := range c.st.inboxes {
		if strings.HasPrefix(i, inbox) {
			out = append(out, i)
		}
	}
	return out
}

func (c sabIdentity) List(ctx context.Context, inbox string, through uint64) ([]ports.IdentityUpdateRecord, error) {
	if c.rule == "identity-through-exclusive" && through > 0 {
		through--
	}
	if c.rule == "identity-inbox-prefix" {
		var all []ports.IdentityUpdateRecord
		for _, i := range c.matching(inbox) {
			rs, err := c.IdentityCache.List(ctx, i, through)
			if err != nil {
				return nil, err
			}
			all = append(all, rs...)
		}
		return all, nil
	}
	rs, err := c.IdentityCache.List(ctx, inbox, through)
	if c.rule == "identity-seq-as-text" {
		slices.SortStableFunc(rs, func(a, b ports.IdentityUpdateRecord) int {
			return strings.Compare(strconv.FormatUint(a.SequenceID, 10), strconv.FormatUint(b.SequenceID, 10))
		})
	}
	return rs, err
}

func (c sabIdentity) Highest(ctx context.Context, inbox string) (uint64, error) {
	if c.rule != "identity-inbox-prefix" {
		return c.IdentityCache.Highest(ctx, inbox)
	}
	var hi uint64
	for _, i := range c.matching(inbox) {
		n, err := c.IdentityCache.Highest(ctx, i)
		if err != nil {
			return 0, err
		}
		hi = max(hi, n)
	}
	return hi, nil
}

func (t sabTx) ProcessedEnvelopes() ports.ProcessedEnvelopes {
	return sabProcessed{t.Tx.ProcessedEnvelopes(), t.rule}
}
