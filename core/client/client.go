package client

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/core/internal/readpos"
	"github.com/regroup-mls/regroup/core/join"
	"github.com/regroup-mls/regroup/core/keypackage"
	"github.com/regroup-mls/regroup/core/recovery"
	"github.com/regroup-mls/regroup/ports"
)

// Errors a client returns beside the ports sentinels.
var (
	// ErrConfig reports a client built with a missing dependency.
	ErrConfig = errors.New("client configuration")
	// ErrNotPermitted reports an operation the conversation's permissions
	// do not grant this installation (COMP-1xx).
	ErrNotPermitted = errors.New("not permitted")
	// ErrCommitLost reports an own commit that lost every commit race the
	// client retried it through.
	ErrCommitLost = errors.New("commit lost to concurrent commits")
	// ErrInactiveConversation reports an operation on a conversation this
	// installation was removed from.
	ErrInactiveConversation = errors.New("conversation is inactive")
	// ErrNoInstallations reports an inbox none of whose installations has
	// a valid key package (JOIN-093).
	ErrNoInstallations = errors.New("no installation with a valid key package")
	// ErrViewer reports a message a viewer of the conversation tried to
	// send: viewers read and update their own keys only (COMP-388).
	ErrViewer = errors.New("a viewer may not send messages")
)

// Client is one installation's view of its conversations: it creates and
// joins groups and DMs, sends and receives messages, processes every
// group topic in order, keeps the commit log and reports fork states. It
// is safe for concurrent use.
type Client struct {
	deps     Deps
	opts     Options
	log      *commitlog.Log
	events   *eventQueue
	logger   *slog.Logger
	sender   join.Sender
	receiver *join.Receiver
	keys     *keypackage.Manager
	rec      *recovery.Recovery

	locks [64]sync.Mutex
	// pub, catchups and ownSent share the message path's costs between
	// concurrent sends (sendpath.go).
	pub      publisher
	catchups catchups
	ownSent  ownSent
	// driving: the groups whose own commit a caller drives (driving.go).
	driving driving
	// tails and junk are the group topics' read positions past their
	// stored cursors and the refusals there (COMP-240).
	tails readpos.Tracker
	// sessions is the transport's session count at the last sync
	// (reissue.go).
	sessions atomic.Uint64
	junk     junkByGroup
	// fetched are the identity states a pass fetched for checkAdded.
	fetched fetchedIdentities

	// background are the loops Start runs beside its own.
	background []background

	// dueLogs are the commit logs due, logTopics the commit-log topics of
	// the held conversations, and synced whether a sync has run
	// (COMP-280 to COMP-283).
	dueLogs   dueLogs
	logTopics logTopicCache
	synced    atomic.Bool
	// subscribed is set while subscriptions follow every topic.
	subscribed atomic.Bool
	recovery   recoveryState
	// lastLogs are the logged conversations of the last sync view.
	lastLogsMu     sync.Mutex
	lastLogs       []loggedGroup
	lastLogsLoaded bool

	mu      sync.Mutex
	workers *workers
	lag     lagMeter

	// sendingOneshots holds the one-shot groups a SendOneshot of this
	// process is sending: a sync leaves their intents to it (COMP-275).
	sendingOneshots sync.Map
	// acc is commit acceptance's memory of stuck groups.
	acc acceptanceState
}

// New returns a client on deps. It checks that the store keeps messages
// ([ports.MessageTx]) and builds the commit log; it starts nothing:
// [Client.Start] runs the workers.
func New(ctx context.Context, deps Deps, opts *Options) (*Client, error) {
	if deps.Store == nil || deps.MLS == nil || deps.Transport == nil || deps.Identity == nil ||
		deps.Clock == nil || deps.Algorithms == nil || len(deps.Installation.InstallationKey) == 0 || deps.Installation.InboxID == "" {
		return nil, fmt.Errorf("%w: every dependency but Logger is required", ErrConfig)
	}
	err := deps.Store.Tx(ctx, func(tx ports.Tx) error {
		if _, ok := tx.(ports.MessageTx); !ok {
			return fmt.Errorf("%w: the store's Tx does not implement ports.MessageTx", ErrConfig)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	c := &Client{deps: deps, opts: opts.withDefaults(), logger: deps.Logger, sender: join.Sender{Algorithms: deps.Algorithms}}
	if c.logger == nil {
		c.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c.events = newEventQueue(c.opts.EventBuffer)
	c.log, err = commitlog.New(commitlog.Options{
		Enabled: !c.opts.DisableCommitLog, Store: deps.Store, Transport: deps.Transport, Clock: deps.Clock,
		Views: deps.MLS, InstallationKey: deps.Installation.InstallationKey, Verifier: commitlog.NewBatchVerifier(),
		OnForked: c.onForked,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: commit log: %v", ErrConfig, err)
	}
	c.rec, err = recovery.New(recovery.Options{Store: deps.Store, MLS: deps.MLS, Transport: deps.Transport, Clock: deps.Clock,
		Algorithms: deps.Algorithms, Installation: deps.Installation, Host: recoveryHost{c}, Policy: c.opts.Recovery,
		CommitLogDisabled: c.opts.DisableCommitLog,
		RefreshInterval:   c.opts.ReaddRefreshInterval, RetryDelay: c.opts.ReaddRetryDelay, Logger: c.logger,
		OnEvent: func(e recovery.Event) { c.events.emit(RecoveryEvent{Event: e}) }})
	if err != nil {
		return nil, fmt.Errorf("%w: recovery: %v", ErrConfig, err)
	}
	c.keys, err = keypackage.NewManager(keypackage.ManagerOptions{Store: deps.Store, Transport: deps.Transport, Engine: deps.MLS,
		Wrappers: deps.Algorithms, Clock: deps.Clock, Identity: deps.Identity, Installation: deps.Installation,
		WrapperAlgorithm: c.opts.WrapperAlgorithm, Lifetime: c.opts.KeyPackageLifetime})
	if err != nil {
		return nil, fmt.Errorf("%w: key packages: %v", ErrConfig, err)
	}
	c.receiver, err = join.NewReceiver(join.ReceiverOptions{Store: deps.Store, MLS: deps.MLS, Transport: deps.Transport,
		Clock: deps.Clock, Algorithms: deps.Algorithms, Installation: deps.Installation, Identity: deps.Identity,
		ProtocolVersion: ProtocolVersion, Log: c.log, CatchUp: c.catchUp, OnJoined: c.onJoined, OnWelcome: c.onWelcome,
		OnOneshot: c.onOneshot, ReplaceForked: c.rec.RepairForked, ReplaceStuck: c.replaceStuck, WelcomeAccepted: c.keys.WelcomeAccepted})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	c.background = append(c.background, func(ctx context.Context) {
		_ = c.keys.Run(ctx, func(err error) { c.logErr("key packages", err) })
	})
	return c, nil
}

// KeyPackages returns the manager of this installation's key packages.
func (c *Client) KeyPackages() *keypackage.Manager { return c.keys }

// InboxID returns the inbox this installation belongs to.
func (c *Client) InboxID() string { return c.deps.Installation.InboxID }

// Identity returns this installation's identity: its inbox and private
// keys, the inbox's recovery key included only when the store keeps it or
// the inbox was created for this client, which hands it out once
// (COMP-261). Whoever holds the recovery key can add installations to the
// inbox and revoke them.
func (c *Client) Identity() identity.Installation { return c.deps.Installation }

// InstallationKey returns this installation's 32-byte public key.
func (c *Client) InstallationKey() []byte { return []byte(c.deps.Installation.PublicKey()) }

// Events returns the stream of [Event]s. There is one stream per client;
// it is closed by [Client.Close].
func (c *Client) Events() <-chan Event { return c.events.out }

// DroppedEvents returns how many events were dropped because the app fell
// more than Options.EventBuffer events behind.
func (c *Client) DroppedEvents() uint64 { return c.events.droppedCount() }

// CommitLog returns the client's commit log, for its counters and for
// the recovery code that reads fork states.
func (c *Client) CommitLog() *commitlog.Log { return c.log }

// Recovery returns the client's fork repair, whose passes the workers and
// [Client.SyncAll] run.
func (c *Client) Recovery() *recovery.Recovery { return c.rec }

// lock serializes the processing of one group's topic and the client's
// own commits in it.
func (c *Client) lock(groupID []byte) func() {
	h := fnv.New32a()
	h.Write(groupID)
	m := &c.locks[h.Sum32()%uint32(len(c.locks))]
	m.Lock()
	return m.Unlock
}

func (c *Client) tx(ctx context.Context, fn func(ctx context.Context, tx ports.Tx) error) error {
	return c.deps.Store.Tx(ctx, func(tx ports.Tx) error { return fn(ctx, tx) })
}

func messagesOf(tx ports.Tx) ports.Messages { return tx.(ports.MessageTx).Messages() }

func (c *Client) onForked(e commitlog.ForkEvent) {
	c.events.emit(ForkStateEvent{GroupID: e.GroupID, State: ports.ForkForked, SharedCommit: e.CommitSequenceID,
		Local: e.Local, Remote: e.Remote, RemoteAuthor: e.RemoteAuthor})
	c.recovery.forkedNow(e.GroupID)
	c.recoveryDue() // a readd request may be due (FORK-050)
}

// Close stops the workers and closes the event stream. It does not close
// the dependencies.
func (c *Client) Close() error {
	c.mu.Lock()
	w := c.workers
	c.workers = nil
	c.mu.Unlock()
	if w != nil {
		w.stop()
	}
	c.events.close()
	return nil
}
