package storetest_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/regroup-mls/regroup/ports"
)

type sabLocal struct {
	ports.LocalCommitLog
	rule string
	st   *sabState
}

func (l sabLocal) Append(ctx context.Context, e ports.LocalCommitLogEntry) (ports.LocalCommitLogEntry, bool, error) {
	if l.rule == "super-admins-capped" && len(e.AddedSuperAdmins) > 255 {
		e.AddedSuperAdmins = e.AddedSuperAdmins[:255]
	}
	stored, inserted, err := l.LocalCommitLog.Append(ctx, e)
	if l.rule == "seq-counter-in-memory" && err == nil && inserted {
		l.st.mu.Lock()
		l.st.seq[string(e.GroupID)]++
		stored.Seq = l.st.seq[string(e.GroupID)]
		l.st.mu.Unlock()
	}
	return stored, inserted, err
}

func (l sabLocal) List(ctx context.Context, g []byte, after uint64, limit int) ([]ports.LocalCommitLogEntry, error) {
	es, err := l.LocalCommitLog.List(ctx, g, after, limit)
	return shortPage(es, limit, l.rule == "local-short-page-dropped"), err
}

func (l sabLocal) ByCommit(ctx context.Context, g []byte, membership, commit uint64) (ports.LocalCommitLogEntry, error) {
	if l.rule == "local-bycommit-any-membership" {
		es, err := l.LocalCommitLog.List(ctx, g, 0, 0)
		if err != nil {
			return ports.LocalCommitLogEntry{}, err
		}
		for _, e := range es {
			if e.CommitSequenceID == commit {
				return e, nil
			}
		}
	}
	return l.LocalCommitLog.ByCommit(ctx, g, membership, commit)
}

type sabRemote struct {
	ports.RemoteCommitLog
	rule string
	st   *sabState
}

func (r sabRemote) List(ctx context.Context, g []byte, after uint64, limit int) ([]ports.RemoteCommitLogEntry, error) {
	if r.rule == "accepted-seq-as-text" {
		es, err := r.RemoteCommitLog.List(ctx, g, after, 0)
		slices.SortStableFunc(es, func(a, b ports.RemoteCommitLogEntry) int {
			return strings.Compare(strconv.FormatUint(a.EnvelopeSequenceID, 10), strconv.FormatUint(b.EnvelopeSequenceID, 10))
		})
		if limit > 0 && len(es) > limit {
			es = es[:limit]
		}
		return es, err
	}
	es, err := r.RemoteCommitLog.List(ctx, g, after, limit)
	return shortPage(es, limit, r.rule == "accepted-short-page-dropped"), err
}

func (r sabRemote) Insert(ctx context.Context, e ports.RemoteCommitLogEntry) (bool, error) {
	inserted, err := r.RemoteCommitLog.Insert(ctx, e)
	if r.rule == "accepted-insert-replaces" && err == nil && !inserted {
		// Replace the stored entry with the new one (an upsert).
		if _, _, err := r.RemoteCommitLog.Rewind(ctx, e.GroupID, e.EnvelopeSequenceID-1); err != nil {
			return false, err
		}
		_, err = r.RemoteCommitLog.Insert(ctx, e)
		return false, err
	}
	return inserted, err
}

func (r sabRemote) SetReadPosition(ctx context.Context, g []byte, seq uint64) error {
	if r.rule == "read-position-overwrites" {
		r.st.mu.Lock()
		r.st.readPos[string(g)] = seq
		r.st.mu.Unlock()
	}
	return r.RemoteCommitLog.SetReadPosition(ctx, g, seq)
}

func (r sabRemote) ReadPosition(ctx context.Context, g []byte) (uint64, error) {
	if r.rule == "read-position-overwrites" {
		r.st.mu.Lock()
		p, ok := r.st.readPos[string(g)]
		r.st.mu.Unlock()
		if ok {
			return p, nil
		}
	}
	return r.RemoteCommitLog.ReadPosition(ctx, g)
}

func (r sabRemote) ByCommit(ctx context.Context, g []byte, commit uint64) (ports.RemoteCommitLogEntry, error) {
	if r.rule == "accepted-bycommit-highest" {
		es, err := r.RemoteCommitLog.List(ctx, g, 0, 0)
		if err != nil {
			return ports.RemoteCommitLogEntry{}, err
		}
		for _, e := range slices.Backward(es) {
			if e.CommitSequenceID == commit {
				return e, nil
			}
		}
	}
	return r.RemoteCommitLog.ByCommit(ctx, g, commit)
}

func (r sabRemote) PutComparison(ctx context.Context, c ports.ForkComparison) error {
	if r.rule == "comparison-first-wins" {
		if _, ok, err := r.RemoteCommitLog.Comparison(ctx, c.GroupID); err != nil || ok {
			return err
		}
	}
	return r.RemoteCommitLog.PutComparison(ctx, c)
}

func (r sabRemote) Rewind(ctx context.Context, g []byte, bound uint64) (uint64, int, error) {
	pos, removed, err := r.RemoteCommitLog.Rewind(ctx, g, bound)
	if r.rule == "rewind-miscounts" && removed > 0 {
		removed--
	}
	return pos, removed, err
}

type sabMessages struct {
	ports.Messages
	rule string
	st   *sabState
}

func (m sabMessages) Insert(ctx context.Context, msg ports.Message) (ports.Message, bool, error) {
	stored, inserted, err := m.Messages.Insert(ctx, msg)
	if m.rule == "message-id-in-memory" && err == nil && inserted {
		m.st.mu.Lock()
		m.st.msgID++
		stored.ID = m.st.msgID
		m.st.mu.Unlock()
	}
	return stored, inserted, err
}

func (m sabMessages) List(ctx context.Context, g []byte, after uint64, limit int) ([]ports.Message, error) {
	ms, err := m.Messages.List(ctx, g, after, limit)
	if m.rule == "messages-in-storage-order" {
		slices.SortStableFunc(ms, func(a, b ports.Message) int { return int(a.ID) - int(b.ID) })
	}
	return shortPage(ms, limit, m.rule == "message-short-page-dropped"), err
}

func (m sabMessages) SetSequenceID(ctx context.Context, id, seq uint64, at time.Time) error {
	err := m.Messages.SetSequenceID(ctx, id, seq, at)
	if m.rule == "set-sequence-absent-ok" && errors.Is(err, ports.ErrNotFound) {
		return nil
	}
	return err
}

type sabBlobs struct {
	ports.Blobs
	rule string
	st   *sabState
}

func (b sabBlobs) Put(ctx context.Context, ns, key string, v []byte) error {
	switch b.rule {
	case "blob-truncated-64k":
		v = v[:min(len(v), 65535)]
	case "blob-put-keeps-caller-buffer":
		b.st.mu.Lock()
		b.st.blobs[ns+"\x00"+key] = v
		b.st.mu.Unlock()
	case "empty-blob-is-absent":
		if len(v) == 0 {
			return b.Blobs.Delete(ctx, ns, key)
		}
	}
	return b.Blobs.Put(ctx, ns, key, v)
}

func (b sabBlobs) Get(ctx context.Context, ns, key string) ([]byte, error) {
	if b.rule == "blob-put-keeps-caller-buffer" || b.rule == "blob-get-shares-buffer" {
		b.st.mu.Lock()
		defer b.st.mu.Unlock()
		if v, ok := b.st.blobs[ns+"\x00"+key]; ok {
			return v, nil
		}
		v, err := b.Blobs.Get(ctx, ns, key)
		if err == nil && b.rule == "blob-get-shares-buffer" {
			b.st.blobs[ns+"\x00"+key] = v
		}
		return v, err
	}
	v, err := b.Blobs.Get(ctx, ns, key)
	if b.rule == "blob-get-by-prefix" && errors.Is(err, ports.ErrNotFound) {
		if keys, kerr := b.Blobs.Keys(ctx, ns, key); kerr == nil && len(keys) > 0 {
			return b.Blobs.Get(ctx, ns, keys[0])
		}
	}
	return v, err
}

// GetPrefix forwards ports.BlobPrefixReader; "blob-prefix-counts-characters"
// cuts the value after n UTF-8 characters, as substr over a TEXT column
// would.
func (b sabBlobs) GetPrefix(ctx context.Context, ns, key string, n int) ([]byte, error) {
	if pr, ok := b.Blobs.(ports.BlobPrefixReader); ok && b.rule != "blob-prefix-counts-characters" {
		return pr.GetPrefix(ctx, ns, key, n)
	}
	v, err := b.Blobs.Get(ctx, ns, key)
	if err != nil {
		return nil, err
	}
	if b.rule != "blob-prefix-counts-characters" {
		return v[:min(max(n, 0), len(v))], nil
	}
	r := []rune(string(v))
	return []byte(string(r[:min(max(n, 0), len(r))])), nil
}

func (b sabBlobs) Delete(ctx context.Context, ns, key string) error {
	if b.rule == "delete-by-prefix" {
		keys, err := b.Blobs.Keys(ctx, ns, key)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if err := b.Blobs.Delete(ctx, ns, k); err != nil {
				return err
			}
		}
	}
	return b.Blobs.Delete(ctx, ns, key)
}

func (b sabBlobs) Keys(ctx context.Context, ns, prefix string) ([]string, error) {
	if b.rule == "keys-case-folded-order" {
		keys, err := b.Blobs.Keys(ctx, ns, prefix)
		slices.SortStableFunc(keys, func(x, y string) int { return strings.Compare(strings.ToLower(x), strings.ToLower(y)) })
		return keys, err
	}
	if b.rule != "keys-like-wildcards" {
		return b.Blobs.Keys(ctx, ns, prefix)
	}
	all, err := b.Blobs.Keys(ctx, ns, "")
	var out []string
	for _, k := range all {
		if likePrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out, err
}

// likePrefix is LIKE 'prefix%' without escaping: '_' matches any one
// byte and '%' any run.
func likePrefix(k, prefix string) bool {
	if i := strings.IndexByte(prefix, '%'); i >= 0 {
		return likePrefix(k, prefix[:i])
	}
	if len(k) < len(prefix) {
		return false
	}
	for i := range len(prefix) {
		if prefix[i] != '_' && prefix[i] != k[i] {
			return false
		}
	}
	return true
}

type sabAdmission struct {
	ports.ReaderAdmission
	rule string
}

func (a sabAdmission) RaiseBoundary(ctx context.Context, g, key []byte, seq uint64) error {
	switch a.rule {
	case "boundary-key-as-utf8":
		if !utf8.Valid(key) {
			key = []byte(strings.ToValidUTF8(string(key), "\uFFFD"))
		}
	case "boundary-overwrites":
		b, err := a.ReaderAdmission.Boundaries(ctx, g)
		if err != nil {
			return err
		}
		b[string(key)] = seq
		return a.ReaderAdmission.ResetBoundaries(ctx, g, b)
	}
	return a.ReaderAdmission.RaiseBoundary(ctx, g, key, seq)
}

func (a sabAdmission) Floor(ctx context.Context, g []byte) (uint64, bool, error) {
	f, ok, err := a.ReaderAdmission.Floor(ctx, g)
	if a.rule == "floor-zero-is-absent" && f == 0 {
		ok = false
	}
	return f, ok, err
}

type sabProcessed struct {
	ports.ProcessedEnvelopes
	rule string
}

// Mark reports a first mark without writing it, as a store that only
// updates a cache does.
func (p sabProcessed) Mark(ctx context.Context, topic []byte, seq uint64) (bool, error) {
	if p.rule == "mark-not-written" {
		has, err := p.ProcessedEnvelopes.Has(ctx, topic, seq)
		return !has, err
	}
	return p.ProcessedEnvelopes.Mark(ctx, topic, seq)
}

type sabPublish struct {
	ports.PublishProgress
	rule string
}

func (p sabPublish) Put(ctx context.Context, s ports.PublishState) error {
	if p.rule == "publish-progress-first-wins" {
		if _, err := p.PublishProgress.Get(ctx, s.GroupID); err == nil {
			return nil
		}
	}
	return p.PublishProgress.Put(ctx, s)
}
