package commitlog

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"github.com/regroup-mls/regroup/core/internal/readpos"
	"maps"
	"sync"

	"github.com/regroup-mls/regroup/ports"
)

// Views returns a group's current public state inside a transaction.
// ports.MLS implements it.
type Views interface {
	Group(ctx context.Context, tx ports.Tx, groupID []byte) (ports.GroupView, error)
}

// ForkEvent reports that a conversation's fork state became forked
// (EVENT-001).
type ForkEvent struct {
	GroupID []byte
	// CommitSequenceID is the shared commit whose authenticators differ.
	CommitSequenceID uint64
	// Local and Remote are the two applied epoch authenticators.
	Local, Remote []byte
	// RemoteAuthor is the installation key of the remote entry's author.
	RemoteAuthor []byte
}

// Options configures a [Log].
type Options struct {
	// Enabled is the deployment's commit_log_enabled (CONF-045). When false
	// nothing is recorded, published or read, and every fork state reads
	// unknown (FORK-004).
	Enabled   bool
	Store     ports.Store
	Transport ports.Transport
	Clock     ports.Clock
	Views     Views
	// Roles defaults to [MetadataRoles].
	Roles RoleView
	// InstallationKey is this installation's Ed25519 signature key: it signs
	// published entries as their author (FORK-076).
	InstallationKey ed25519.PrivateKey
	// Verifier defaults to [SingleVerifier]; [NewBatchVerifier] checks many
	// signatures at once with the same answers.
	Verifier Verifier
	// PageSize bounds envelopes per commit-log query, and so per batch of
	// signatures verified together; default 1000 (a delivery service may
	// serve fewer).
	PageSize int
	// PublishBatch bounds entries per publish request; default 256.
	PublishBatch int
	// OnForked, when set, is called once per transition to forked, after
	// the transaction that stored it commits.
	OnForked func(ForkEvent)
}

// Log is the commit log of one client installation. It is safe for
// concurrent use across conversations; each conversation's Publish and
// Read are serialized.
type Log struct {
	opts Options

	mu       sync.Mutex
	counters map[Reason]uint64
	locks    map[string]*convLock
	// tails are the topics' read positions past junk (COMP-242).
	tails readpos.Tracker
}

// convLock serializes one conversation's passes; it is dropped from the
// map when no pass holds or waits for it.
type convLock struct {
	mu   sync.Mutex
	refs int
}

// New returns a Log. Store, Clock and Views are required; Transport and
// InstallationKey are required for Publish and Read.
func New(opts Options) (*Log, error) {
	if opts.Store == nil || opts.Clock == nil || opts.Views == nil {
		return nil, errors.New("commitlog: Store, Clock and Views are required")
	}
	if opts.Roles == nil {
		opts.Roles = MetadataRoles{}
	}
	if opts.Verifier == nil {
		opts.Verifier = SingleVerifier{}
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 1000
	}
	if opts.PublishBatch <= 0 {
		opts.PublishBatch = 256
	}
	return &Log{opts: opts, counters: map[Reason]uint64{}, locks: map[string]*convLock{}}, nil
}

// Counters returns how many envelopes were discarded per reason since the
// Log was created.
func (l *Log) Counters() map[Reason]uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.counters)
}

func (l *Log) count(c map[Reason]uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for r, n := range c {
		l.counters[r] += n
	}
}

// lock serializes the passes of one conversation. The map holds only the
// conversations with a pass running or waiting.
func (l *Log) lock(groupID []byte) func() {
	k := string(groupID)
	l.mu.Lock()
	c, ok := l.locks[k]
	if !ok {
		c = &convLock{}
		l.locks[k] = c
	}
	c.refs++
	l.mu.Unlock()
	c.mu.Lock()
	return func() {
		c.mu.Unlock()
		l.mu.Lock()
		if c.refs--; c.refs == 0 {
			delete(l.locks, k)
		}
		l.mu.Unlock()
	}
}

// notify reports a transition to forked to Options.OnForked.
func (l *Log) notify(ev *ForkEvent) {
	if ev != nil && l.opts.OnForked != nil {
		l.opts.OnForked(*ev)
	}
}

// Notify reports the transition to forked a [Recorded] carries, if any,
// to Options.OnForked. Call it after the transaction that recorded it
// commits (COMP-095).
func (l *Log) Notify(r Recorded) { l.notify(r.Forked) }

// ForkState returns the conversation's fork state (FORK-072): unknown
// whenever the log is disabled (FORK-004).
func (l *Log) ForkState(ctx context.Context, groupID []byte) (ports.ForkState, error) {
	var s ports.ForkState
	err := l.opts.Store.Tx(ctx, func(tx ports.Tx) error {
		g, err := tx.Groups().Get(ctx, groupID)
		if err != nil {
			return err
		}
		s = g.ForkState
		return nil
	})
	if err != nil {
		return ports.ForkUnknown, fmt.Errorf("fork state: %w", err)
	}
	if !l.opts.Enabled {
		return ports.ForkUnknown, nil
	}
	return s, nil
}

// MaybeForked returns the FORK-073 diagnostic and the reason it was set.
func (l *Log) MaybeForked(ctx context.Context, groupID []byte) (bool, string, error) {
	var g ports.Group
	err := l.opts.Store.Tx(ctx, func(tx ports.Tx) error {
		var err error
		g, err = tx.Groups().Get(ctx, groupID)
		return err
	})
	if err != nil {
		return false, "", fmt.Errorf("maybe forked: %w", err)
	}
	return g.MaybeForked, g.MaybeForkedReason, nil
}

// LocalEntries returns the conversation's local entries in recording order
// (FORK-072).
func (l *Log) LocalEntries(ctx context.Context, groupID []byte) ([]ports.LocalCommitLogEntry, error) {
	var out []ports.LocalCommitLogEntry
	err := l.opts.Store.Tx(ctx, func(tx ports.Tx) error {
		var err error
		out, err = tx.LocalCommitLog().List(ctx, groupID, 0, 0)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("local entries: %w", err)
	}
	return out, nil
}

// RemoteEntries returns the conversation's accepted remote entries in
// envelope order (FORK-072).
func (l *Log) RemoteEntries(ctx context.Context, groupID []byte) ([]ports.RemoteCommitLogEntry, error) {
	var out []ports.RemoteCommitLogEntry
	err := l.opts.Store.Tx(ctx, func(tx ports.Tx) error {
		var err error
		out, err = tx.RemoteCommitLog().List(ctx, groupID, 0, 0)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("remote entries: %w", err)
	}
	return out, nil
}

// keysFor returns the commit-log keys of a conversation whose log is kept,
// or an error wrapping [ErrNoCommitLog].
func keysFor(g ports.Group) (Keys, error) {
	switch {
	case g.RestoredPlaceholder:
		return Keys{}, fmt.Errorf("restored group: %w", ErrNoCommitLog)
	case g.ConversationType == ports.ConversationOneshot || g.ConversationType == ports.ConversationSync:
		return Keys{}, fmt.Errorf("conversation type %d: %w", g.ConversationType, ErrNoCommitLog)
	case len(g.ID) != 32:
		return Keys{}, fmt.Errorf("group id of %d bytes: %w", len(g.ID), ErrNoCommitLog)
	}
	return DeriveKeys(g.GroupRoot)
}
