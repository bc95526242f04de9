package client

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/ports"
)

// A sync costs what changed (COMP-280): one store transaction reads
// every held group, its stored cursor and commit-log read position and
// the groups with an own pending commit; one batched read per 1,024
// topics ([ports.HighestReader]) tells which topics moved past those
// positions; only those groups, and those with a pending commit, are
// processed, and only the commit logs that moved or are due are synced.

// syncView is what one sync reads of the store, in one transaction.
type syncView struct {
	groups []ports.Group
	// intents are the groups holding an own commit intent.
	intents map[string]bool
	// logs are the logged conversations with their commit-log topic and
	// read position.
	logs []loggedGroup
	// unconfirmed are the groups that may hold a commit-log entry still to
	// publish; set only on the client's first sync (COMP-281).
	unconfirmed map[string]bool
}

type loggedGroup struct {
	id     []byte
	topic  []byte
	pos    uint64
	active bool
}

// loadView reads the sync view in one transaction. withUnconfirmed also
// reads the groups with an unconfirmed commit-log entry.
func (c *Client) loadView(ctx context.Context, withUnconfirmed bool) (v syncView, err error) {
	err = c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		v = syncView{intents: map[string]bool{}}
		if v.groups, err = tx.Groups().List(ctx, ports.GroupFilter{}); err != nil {
			return err
		}
		keys, err := tx.Blobs().Keys(ctx, nsIntent, "")
		if err != nil {
			return err
		}
		for _, k := range keys {
			if id, err := hex.DecodeString(k); err == nil {
				v.intents[string(id)] = true
			}
		}
		ov, hasOverview := tx.(ports.CommitLogOverviewTx)
		var positions map[string]uint64
		if hasOverview && !c.opts.DisableCommitLog {
			if positions, err = ov.CommitLogOverview().ReadPositions(ctx); err != nil {
				return err
			}
		}
		for _, g := range v.groups {
			if !logged(g) || c.opts.DisableCommitLog {
				continue
			}
			topic, ok := c.logTopics.topic(g.GroupRoot)
			if !ok {
				continue
			}
			pos := positions[string(g.ID)]
			if !hasOverview {
				if pos, err = tx.RemoteCommitLog().ReadPosition(ctx, g.ID); err != nil {
					return err
				}
			}
			v.logs = append(v.logs, loggedGroup{id: g.ID, topic: topic, pos: pos, active: g.Active})
		}
		if withUnconfirmed && !c.opts.DisableCommitLog {
			v.unconfirmed = map[string]bool{}
			if !hasOverview {
				for _, l := range v.logs {
					v.unconfirmed[string(l.id)] = true
				}
				return nil
			}
			ids, err := ov.CommitLogOverview().Unconfirmed(ctx)
			if err != nil {
				return err
			}
			for _, id := range ids {
				v.unconfirmed[string(id)] = true
			}
		}
		return nil
	})
	if err != nil {
		return syncView{}, fmt.Errorf("load groups: %w", err)
	}
	c.logTopics.keep(v.groups)
	c.lastLogsMu.Lock()
	c.lastLogs, c.lastLogsLoaded = v.logs, true
	c.lastLogsMu.Unlock()
	return v, nil
}

// followed reports whether the group's topic is processed by syncs and
// followed by subscriptions.
func followed(g ports.Group) bool {
	return g.Active && g.ConversationType != ports.ConversationOneshot
}

// highest returns the highest sequence id of each topic, in batches of
// [ports.MaxHighestTopics]. ok is false when the transport has no
// batched read: the caller then treats every topic as moved.
func (c *Client) highest(ctx context.Context, topics [][]byte) (ids []uint64, ok bool, err error) {
	hr, ok := c.deps.Transport.(ports.HighestReader)
	if !ok {
		return nil, false, nil
	}
	ids = make([]uint64, 0, len(topics))
	for start := 0; start < len(topics); start += ports.MaxHighestTopics {
		chunk := topics[start:min(start+ports.MaxHighestTopics, len(topics))]
		got, err := hr.HighestSequenceIDs(ctx, chunk)
		if err != nil {
			return nil, true, fmt.Errorf("highest sequence ids: %w", err)
		}
		if len(got) != len(chunk) {
			return nil, true, fmt.Errorf("highest sequence ids: %d answers for %d topics", len(got), len(chunk))
		}
		ids = append(ids, got...)
	}
	return ids, true, nil
}

// movedGroups returns the followed groups whose topic holds an id above
// the stored cursor; all of them when the transport cannot tell.
func (c *Client) movedGroups(ctx context.Context, v syncView) map[string]bool {
	var topics [][]byte
	var gs []ports.Group
	for _, g := range v.groups {
		if followed(g) {
			topics = append(topics, groupTopic(g.ID))
			gs = append(gs, g)
		}
	}
	moved := make(map[string]bool)
	if len(topics) == 0 {
		return moved
	}
	ids, ok, err := c.highest(ctx, topics)
	// Without an answer every group is read, as a sync without the
	// batched read does: a sync must not miss what moved. The failure is
	// logged, not returned: the sync itself still does all it should.
	c.logErr("sync", err)
	for i, g := range gs {
		if ok && err == nil && ids[i] < g.Cursor {
			// The service holds less than this client read: it reissues
			// ids (COMP-466).
			c.logErr("sync", c.rewindGroup(ctx, g.ID, fmt.Sprintf("highest id %d below the cursor", ids[i])))
		}
		if !ok || err != nil || ids[i] != g.Cursor {
			moved[string(g.ID)] = true
		}
	}
	return moved
}

// movedLogs returns the logged conversations whose commit-log topic
// holds an id above the stored read position; all of them when the
// transport cannot tell.
func (c *Client) movedLogs(ctx context.Context, logs []loggedGroup) map[string]bool {
	moved := make(map[string]bool)
	if len(logs) == 0 {
		return moved
	}
	topics := make([][]byte, len(logs))
	for i, l := range logs {
		topics[i] = l.topic
	}
	ids, ok, err := c.highest(ctx, topics)
	c.logErr("commit log", err) // as in movedGroups
	for i, l := range logs {
		if !ok || err != nil || ids[i] > l.pos {
			moved[string(l.id)] = true
		}
	}
	return moved
}

// SyncAll processes every pending Welcome and every group topic that
// moved now, then publishes and reads the commit logs that are due, then
// sends the readd requests due and answers those kept (when a
// conversation is forked, a request is kept, or recovery was asked for,
// COMP-284). A group topic
// moved when the delivery service holds an envelope above its stored
// cursor; a commit log is due when its topic moved, when a commit was
// merged in its conversation, when its last sync failed, and, on the
// client's first sync, when it may hold an entry still to publish. It
// returns the errors after trying everything.
func (c *Client) SyncAll(ctx context.Context) error { return c.sync(ctx, true) }

// sync is SyncAll; checkLogs false leaves out the check of every commit
// log topic, which the workers' timed sync does while their
// subscriptions follow those topics (COMP-285): the logs due are synced
// all the same.
func (c *Client) sync(ctx context.Context, checkLogs bool) error {
	// Welcomes first: a held Welcome that ends lets the key tick destroy
	// the keys it kept (JOIN-018, JOIN-074) in the same sync.
	c.recheckKeysOnNewSession()
	errs := []error{c.processWelcomes(ctx), c.retryWelcomes(ctx), c.keys.Tick(ctx), c.resendOutbox(ctx), c.resendWelcomes(ctx)}
	first := !c.synced.Load()
	v, err := c.loadView(ctx, first)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	moved := c.movedGroups(ctx, v)
	for _, g := range v.groups {
		id := string(g.ID)
		if g.ConversationType == ports.ConversationOneshot && v.intents[id] {
			errs = append(errs, c.resumeOneshot(ctx, g.ID))
			continue
		}
		if !followed(g) || (!moved[id] && !v.intents[id] && !c.acc.marked(g.ID)) {
			continue
		}
		unlock := c.lock(g.ID)
		if v.intents[id] && !c.driving.active(g.ID) {
			errs = append(errs, c.settleIntent(ctx, g.ID))
		}
		errs = append(errs, c.processGroup(ctx, g.ID))
		unlock()
	}
	errs = append(errs, c.removeLeavers(ctx)) // leave.go
	logsMoved := map[string]bool{}
	if checkLogs {
		logsMoved = c.movedLogs(ctx, v.logs)
	}
	for id := range v.unconfirmed {
		logsMoved[id] = true
	}
	errs = append(errs, c.syncDueLogs(ctx, v.logs, logsMoved, 0))
	c.synced.Store(true)
	c.recovery.sawForked(forkedOf(v.groups))
	errs = append(errs, c.recoveryPass(ctx))
	return errors.Join(errs...)
}

// syncDueLogs syncs the commit log of every logged conversation in due,
// those merged or failed since, and, when sweep > 0, the next sweep
// conversations in turn (the bounded timed fallback, COMP-282). A
// failed sync is due again at the next pass.
func (c *Client) syncDueLogs(ctx context.Context, logs []loggedGroup, due map[string]bool, sweep int) error {
	if c.opts.DisableCommitLog {
		return nil
	}
	for id := range c.dueLogs.take() {
		due[id] = true
	}
	if sweep > 0 && len(logs) > 0 {
		start := c.dueLogs.advance(len(logs), sweep)
		for i := range min(sweep, len(logs)) {
			due[string(logs[(start+i)%len(logs)].id)] = true
		}
	}
	var errs []error
	for _, l := range logs {
		if !due[string(l.id)] {
			continue
		}
		if err := c.syncLog(ctx, l.id); err != nil {
			errs = append(errs, err)
			c.dueLogs.retry(l.id)
		}
	}
	return errors.Join(errs...)
}

// logPass is the commit-log loop's timed pass: the logs due, and a
// bounded sweep of the others, and, while no subscription follows the
// log topics, those whose topic moved. It takes the logged conversations
// from the last sync view (a sync or a resubscribe reloads it) and reads
// only their positions.
func (c *Client) logPass(ctx context.Context) error {
	if c.subscribed.Load() {
		// The subscriptions follow every log topic: only the logs due,
		// those whose sync failed and the sweep (COMP-285).
		c.lastLogsMu.Lock()
		logs := c.lastLogs
		c.lastLogsMu.Unlock()
		return c.syncDueLogs(ctx, logs, map[string]bool{}, logSweep)
	}
	logs, err := c.logPositions(ctx)
	if err != nil {
		return err
	}
	return c.syncDueLogs(ctx, logs, c.movedLogs(ctx, logs), logSweep)
}

// logPositions returns the logged conversations of the last sync view
// with their read positions now, in one transaction; the whole view when
// none was loaded yet.
func (c *Client) logPositions(ctx context.Context) ([]loggedGroup, error) {
	c.lastLogsMu.Lock()
	logs := slices.Clone(c.lastLogs)
	loaded := c.lastLogsLoaded
	c.lastLogsMu.Unlock()
	if !loaded {
		v, err := c.loadView(ctx, false)
		return v.logs, err
	}
	err := c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		if ov, ok := tx.(ports.CommitLogOverviewTx); ok {
			pos, err := ov.CommitLogOverview().ReadPositions(ctx)
			for i := range logs {
				logs[i].pos = pos[string(logs[i].id)]
			}
			return err
		}
		for i := range logs {
			p, err := tx.RemoteCommitLog().ReadPosition(ctx, logs[i].id)
			if err != nil {
				return err
			}
			logs[i].pos = p
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read commit-log positions: %w", err)
	}
	return logs, nil
}

// logSweep is how many commit logs each timed pass syncs whether or not
// anything says they changed (COMP-282).
const logSweep = 8

// dueLogs are the conversations whose commit log is due: named by
// logDue (a merged commit, a consent change) or by a failed sync.
type dueLogs struct {
	mu    sync.Mutex
	ids   map[string]bool
	since time.Time // when ids last became non-empty
	// retries are logs whose last sync failed: due at the next pass,
	// not at once, so a failure does not spin.
	retries map[string]bool
	next    int // the sweep's position
}

func (d *dueLogs) add(id []byte, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ids == nil {
		d.ids = map[string]bool{}
	}
	if len(d.ids) == 0 {
		d.since = now
	}
	d.ids[string(id)] = true
}

func (d *dueLogs) retry(id []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.retries == nil {
		d.retries = map[string]bool{}
	}
	d.retries[string(id)] = true
}

// takeNow returns and forgets the logs due at once.
func (d *dueLogs) takeNow() map[string]bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	ids := d.ids
	d.ids = nil
	if ids == nil {
		ids = map[string]bool{}
	}
	return ids
}

// take returns and forgets every due log, retries included.
func (d *dueLogs) take() map[string]bool {
	ids := d.takeNow()
	d.mu.Lock()
	defer d.mu.Unlock()
	for id := range d.retries {
		ids[id] = true
	}
	d.retries = nil
	return ids
}

// advance returns where the sweep starts and moves it on by n of size.
func (d *dueLogs) advance(size, n int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	start := d.next % size
	d.next = (start + n) % size
	return start
}

// waiting returns how many logs are due at once and since when.
func (d *dueLogs) waiting() (int, time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.ids), d.since
}

// logTopicCache keeps each group root's commit-log topic, so that a sync
// derives a conversation's keys once, not on every pass (COMP-283).
type logTopicCache struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (k *logTopicCache) topic(root []byte) ([]byte, bool) {
	k.mu.Lock()
	t, ok := k.m[string(root)]
	k.mu.Unlock()
	if ok {
		return t, true
	}
	keys, err := commitlog.DeriveKeys(root)
	if err != nil {
		return nil, false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = map[string][]byte{}
	}
	k.m[string(root)] = keys.Topic
	return keys.Topic, true
}

// keep forgets the roots of groups no longer held.
func (k *logTopicCache) keep(gs []ports.Group) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.m) <= len(gs) {
		return
	}
	held := make(map[string]bool, len(gs))
	for _, g := range gs {
		held[string(g.GroupRoot)] = true
	}
	for r := range k.m {
		if !held[r] {
			delete(k.m, r)
		}
	}
}
