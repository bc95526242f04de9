package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// workers are the client's background loops. They run from Start until
// Close or the end of Start's context.
type workers struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// resubscribe asks the topic loop to subscribe again, because the set
	// of topics changed.
	resubscribe chan struct{}
	// due wakes the commit-log loop for the logs due now.
	due chan struct{}
	// recovery asks the recovery loop for a pass now.
	recovery chan struct{}
}

func (w *workers) stop() {
	w.cancel()
	w.wg.Wait()
}

// background is work Start runs beside the topic and commit-log loops,
// such as key-package rotation and held-Welcome retries; each runs until
// ctx ends.
type background func(ctx context.Context)

// Start runs the client's workers until ctx ends or Close is called:
// subscriptions to every held group topic, the installation's welcome
// topic and the commit-log topic of every allowed conversation, as many
// as the delivery service's topic limit requires (COMP-277), which
// process each topic as envelopes arrive (and, every SyncInterval, every
// topic that moved, COMP-280); the commit-log loop, which publishes and
// reads a conversation's log at once after it recorded an entry, and
// every CommitLogInterval the logs that moved and a few others in turn
// (COMP-282); the recovery loop, which sends readd requests and answers
// them at once when a conversation becomes forked or a request arrives,
// and every RecoveryInterval while it may have work (COMP-284); and the
// key-package loop. A delivery service that goes away and comes back is
// resubscribed from the stored cursors, so nothing is missed or
// processed twice.
func (c *Client) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.workers != nil {
		return errors.New("client already started")
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &workers{cancel: cancel, resubscribe: make(chan struct{}, 1), due: make(chan struct{}, 1),
		recovery: make(chan struct{}, 1)}
	c.workers = w
	loops := append([]background{c.topicLoop, c.commitLogLoop, c.recoveryLoop}, c.background...)
	for _, loop := range loops {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			loop(ctx)
		}()
	}
	return nil
}

// wakeWorkers tells the topic loop the set of topics may have changed.
func (c *Client) wakeWorkers() {
	c.mu.Lock()
	w := c.workers
	c.mu.Unlock()
	if w == nil {
		return
	}
	select {
	case w.resubscribe <- struct{}{}:
	default:
	}
}

// logDue schedules the conversation's commit log now: at once when the
// workers run, else at the next sync.
func (c *Client) logDue(groupID []byte) {
	c.dueLogs.add(groupID, c.deps.Clock.Now())
	w := c.currentWorkers()
	if w == nil {
		return
	}
	select {
	case w.due <- struct{}{}:
	default:
	}
}

// recoveryDue asks the recovery loop for a pass now, or the next sync
// when the workers do not run.
func (c *Client) recoveryDue() {
	c.recovery.ask()
	if w := c.currentWorkers(); w != nil {
		select {
		case w.recovery <- struct{}{}:
		default:
		}
	}
}

// recoveryLoop runs the recovery's pass when recoveryDue asks for one,
// and every RecoveryInterval when it may have work (COMP-284). A pass never runs under a group lock: it takes
// the locks of the groups it processes and commits in.
func (c *Client) recoveryLoop(ctx context.Context) {
	w := c.currentWorkers()
	tick := time.NewTicker(c.opts.RecoveryInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-w.recovery:
		}
		c.logErr("recovery", c.recoveryPass(ctx))
	}
}

func (c *Client) heldGroups(ctx context.Context) (gs []ports.Group, err error) {
	err = c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		gs, err = tx.Groups().List(ctx, ports.GroupFilter{})
		return err
	})
	return gs, err
}

func (c *Client) syncLog(ctx context.Context, groupID []byte) error {
	before, _ := c.log.ForkState(ctx, groupID)
	rep, err := c.log.Sync(ctx, groupID)
	if errors.Is(rep.PublishErr, commitlog.ErrNoCommitLog) {
		err = rep.ReadErr
	}
	if st := rep.Read.ForkState; rep.ReadErr == nil && st != before && st != ports.ForkForked {
		c.events.emit(ForkStateEvent{GroupID: groupID, State: st})
		c.recoveryDue() // a readder that was unknown may act now (FORK-080)
	}
	return err
}

// logged reports whether the commit log of g is published and read:
// consent allowed, a group or DM with a group root (FORK-030).
func logged(g ports.Group) bool {
	return g.Consent == ports.ConsentAllowed && len(g.GroupRoot) == 32 &&
		(g.ConversationType == ports.ConversationGroup || g.ConversationType == ports.ConversationDM)
}

// commitLogLoop syncs a conversation's commit log at once when logDue
// named it, and every CommitLogInterval runs the timed pass: the logs
// whose topic moved or whose last sync failed, and a bounded sweep of the
// others (COMP-282).
func (c *Client) commitLogLoop(ctx context.Context) {
	if c.opts.DisableCommitLog {
		return
	}
	w := c.currentWorkers()
	tick := time.NewTicker(c.opts.CommitLogInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			c.logErr("commit log pass", c.logPass(ctx))
		case <-w.due:
			for id := range c.dueLogs.takeNow() {
				if err := c.syncLog(ctx, []byte(id)); err != nil {
					c.logErr("commit log", err)
					c.dueLogs.retry([]byte(id))
				}
			}
		}
	}
}

func (c *Client) currentWorkers() *workers {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.workers
}

func (c *Client) logErr(what string, err error) {
	if err != nil && !errors.Is(err, context.Canceled) {
		c.logger.Warn(what, "err", err)
	}
}

// topicLoop keeps one subscription over every topic the client follows
// and processes each topic an envelope arrives on.
func (c *Client) topicLoop(ctx context.Context) {
	w := c.currentWorkers()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		c.logErr("sync", c.SyncAll(ctx))
		err := c.subscribeOnce(ctx, w)
		if err == nil {
			backoff = 100 * time.Millisecond
			continue
		}
		c.logErr("subscription", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// subscribeOnce subscribes to the current topics and processes arrivals
// until the topic set changes (nil), ctx ends, or the subscription fails.
func (c *Client) subscribeOnce(ctx context.Context, w *workers) error {
	cursors, route, err := c.cursors(ctx)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	subs, err := subscribeAll(sctx, c.deps.Transport, cursors, c.opts.SubscriptionTopics)
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	defer subs.close()
	c.subscribed.Store(true)
	defer c.subscribed.Store(false)
	envs := make(chan *backendpb.OriginatorEnvelope, 64)
	failed := make(chan error, 1)
	subs.run(sctx, envs, failed)
	arrived := make(chan []byte, 64)
	go func() {
		for {
			select {
			case env := <-envs:
				c.lag.received(env.GetServerTimestampNs())
				select {
				case arrived <- env.GetEnvelope().GetTargetTopic():
				case <-sctx.Done():
					return
				}
			case <-sctx.Done():
				return
			}
		}
	}()
	tick := time.NewTicker(c.opts.SyncInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.resubscribe:
			return nil
		case <-tick.C:
			c.logErr("sync", c.sync(ctx, false))
		case err := <-failed:
			if ctx.Err() != nil {
				return nil
			}
			return err
		case topic := <-arrived:
			c.logErr("process", route(ctx, topic))
			c.lag.processed(c.deps.Clock.Now())
		}
	}
}

// cursors returns the subscription cursors of every followed topic and a
// function that processes a topic an envelope arrived on. The groups and
// their positions come from one transaction.
func (c *Client) cursors(ctx context.Context) ([]ports.TopicCursor, func(context.Context, []byte) error, error) {
	v, err := c.loadView(ctx, false)
	if err != nil {
		return nil, nil, err
	}
	byTopic := map[string]func(context.Context) error{}
	var cursors []ports.TopicCursor
	wt, wc, err := c.welcomeCursor(ctx)
	if err != nil {
		return nil, nil, err
	}
	cursors = append(cursors, ports.TopicCursor{Topic: wt, After: wc})
	byTopic[string(wt)] = c.processWelcomes
	for _, g := range v.groups {
		if !followed(g) {
			continue
		}
		id := g.ID
		topic := groupTopic(id)
		cursors = append(cursors, ports.TopicCursor{Topic: topic, After: g.Cursor})
		byTopic[string(topic)] = func(ctx context.Context) error {
			defer c.lock(id)()
			if c.driving.active(id) { // its caller settles the intent (driving.go)
				return c.processGroup(ctx, id)
			}
			return errors.Join(c.settleIntent(ctx, id), c.processGroup(ctx, id))
		}
	}
	for _, l := range v.logs {
		if !l.active {
			continue
		}
		id := l.id
		cursors = append(cursors, ports.TopicCursor{Topic: l.topic, After: l.pos})
		byTopic[string(l.topic)] = func(ctx context.Context) error {
			_, err := c.log.Read(ctx, id)
			return err
		}
	}
	route := func(ctx context.Context, topic []byte) error {
		if fn, ok := byTopic[string(topic)]; ok {
			return fn(ctx)
		}
		if bytes.HasPrefix(topic, []byte{byte(ports.TopicWelcomes)}) {
			return c.processWelcomes(ctx)
		}
		return nil
	}
	return cursors, route, nil
}
