package delivery

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// RefusedQuota is the [Observer.Refused] reason of a publish refused by a
// storage quota (COMP-325).
const RefusedQuota = "quota"

// ErrQuotaExceeded is wrapped, beside [ports.ErrRateLimited] (so gRPC
// answers ResourceExhausted), by the error of a publish a storage quota
// refused; its text names the topic kind, the quota and when it renews.
var ErrQuotaExceeded = errors.New("storage quota exceeded")

// Quota bounds the stored bytes one publisher (an installation key) may
// add to topics of one kind in each Window (COMP-325).
type Quota struct {
	Bytes  int64
	Window time.Duration
}

// quotas counts each publisher's stored bytes per topic kind in the
// current window. Counts live in this process: each replica enforces its
// own, and a restart starts them afresh.
type quotas struct {
	limits map[ports.TopicKind]Quota
	mu     sync.Mutex
	used   map[quotaKey]*quotaUse
	swept  time.Time
}

type quotaKey struct {
	publisher string
	kind      ports.TopicKind
}

type quotaUse struct {
	start time.Time
	bytes int64
}

func newQuotas(limits map[ports.TopicKind]Quota) *quotas {
	return &quotas{limits: limits, used: map[quotaKey]*quotaUse{}}
}

// take counts bytes per kind for publisher at now, all or nothing: it
// refuses when one kind would pass its quota.
func (q *quotas) take(publisher []byte, bytes map[ports.TopicKind]int64, now time.Time) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for kind, n := range bytes {
		l, ok := q.limits[kind]
		if !ok || l.Bytes <= 0 || l.Window <= 0 {
			continue
		}
		u := q.use(publisher, kind, l, now)
		if u.bytes+n > l.Bytes {
			return fmt.Errorf("%w: %w: installation stored %d bytes of %s in this window, quota %d per %s; renews in %s",
				ports.ErrRateLimited, ErrQuotaExceeded, u.bytes, KindName([]byte{byte(kind)}), l.Bytes, l.Window,
				u.start.Add(l.Window).Sub(now).Round(time.Second))
		}
	}
	for kind, n := range bytes {
		if l, ok := q.limits[kind]; ok && l.Bytes > 0 && l.Window > 0 {
			q.use(publisher, kind, l, now).bytes += n
		}
	}
	q.sweep(now)
	return nil
}

func (q *quotas) use(publisher []byte, kind ports.TopicKind, l Quota, now time.Time) *quotaUse {
	k := quotaKey{string(publisher), kind}
	u := q.used[k]
	if u == nil || now.Sub(u.start) >= l.Window {
		u = &quotaUse{start: now}
		q.used[k] = u
	}
	return u
}

// sweep forgets windows that ended, when the map has grown.
func (q *quotas) sweep(now time.Time) {
	if len(q.used) < 4096 || now.Sub(q.swept) < time.Minute {
		return
	}
	q.swept = now
	for k, u := range q.used {
		if now.Sub(u.start) >= q.limits[k.kind].Window {
			delete(q.used, k)
		}
	}
}

// DefaultQuotas are the storage quotas a [Service] applies when
// Options.Quotas is nil (COMP-325): per installation key and hour, 256 MiB
// of group messages, 32 MiB of Welcomes, 1 MiB of identity updates, 8 MiB
// of key packages and 64 MiB of commit-log entries; GroupInfos, which only
// committers publish beside their commits, have the group messages' quota
// of their own.
func DefaultQuotas() map[ports.TopicKind]Quota {
	return map[ports.TopicKind]Quota{
		ports.TopicGroupMessages:   {Bytes: 256 << 20, Window: time.Hour},
		ports.TopicGroupInfo:       {Bytes: 256 << 20, Window: time.Hour},
		ports.TopicWelcomes:        {Bytes: 32 << 20, Window: time.Hour},
		ports.TopicIdentityUpdates: {Bytes: 1 << 20, Window: time.Hour},
		ports.TopicKeyPackages:     {Bytes: 8 << 20, Window: time.Hour},
		ports.TopicCommitLog:       {Bytes: 64 << 20, Window: time.Hour},
	}
}
