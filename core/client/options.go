package client

import (
	"log/slog"
	"time"

	"github.com/regroup-mls/regroup/core/algorithm"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/ports"
)

// Deps are the ports a [Client] runs on. Every field is required except
// Logger.
type Deps struct {
	Store     ports.Store
	MLS       ports.MLS
	Transport ports.Transport
	// Identity resolves other inboxes' association state (JOIN-051).
	Identity ports.Identity
	Clock    ports.Clock
	// Algorithms holds the Welcome wrapper and pointee AEAD algorithms
	// (JOIN-071, JOIN-076), built-in or plugin-hosted.
	Algorithms *algorithm.Registry
	// Installation is this installation's identity (core/identity.Load).
	Installation identity.Installation
	// Logger receives the client's logs; nil discards them.
	Logger *slog.Logger
}

// RecoveryMode selects the conversations a client sends readd requests
// for (FORK-070).
type RecoveryMode int

const (
	// RecoverNone sends no readd request. It is the default.
	RecoverNone RecoveryMode = iota
	// RecoverListed sends requests for the group ids in
	// [RecoveryPolicy.Groups] only.
	RecoverListed
	// RecoverAll sends requests for every conversation.
	RecoverAll
)

// RecoveryPolicy is the recovery policy of fork-recovery section 8. The
// zero value is the default the spec requires: no requests, responses
// enabled (FORK-070).
type RecoveryPolicy struct {
	Mode RecoveryMode
	// Groups are the group ids requests are sent for under RecoverListed.
	Groups [][]byte
	// DisableResponses stops this client from publishing readd commits
	// (FORK-071). Publishing and reading the commit log are unaffected.
	DisableResponses bool
}

// Options configure a [Client]. The zero value of every field selects the
// documented default.
type Options struct {
	// DisableCommitLog turns the deployment's commit_log_enabled
	// (CONF-045) off: nothing is recorded, published or read, and every
	// fork state reads unknown (FORK-004). The log is on by default.
	DisableCommitLog bool
	// Recovery is the recovery policy (FORK-070).
	Recovery RecoveryPolicy
	// KeyPackageLifetime is the lifetime of published key packages;
	// default 12 weeks (joining-groups section 2).
	KeyPackageLifetime time.Duration
	// WrapperAlgorithm is the Welcome wrapper this installation's key
	// packages advertise; default X-Wing (COMP-127).
	WrapperAlgorithm ports.WrapperAlgorithmID
	// SyncInterval is how often the workers re-read every topic even when
	// no subscription woke them; default 30s. Subscriptions wake them at
	// once, so this is a safety net.
	SyncInterval time.Duration
	// CommitLogInterval is how often every conversation's commit log is
	// published and read; default 10s. A commit the client applies
	// schedules its conversation's log at once.
	CommitLogInterval time.Duration
	// CommitRetries bounds how often the client rebuilds its own commit
	// after losing a commit race; default 5.
	CommitRetries int
	// EventBuffer bounds undelivered events; default 4096. When the app
	// falls that far behind, the oldest event is dropped and counted
	// ([Client.DroppedEvents]).
	EventBuffer int
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.KeyPackageLifetime <= 0 {
		r.KeyPackageLifetime = 12 * 7 * 24 * time.Hour
	}
	if r.SyncInterval <= 0 {
		r.SyncInterval = 30 * time.Second
	}
	if r.CommitLogInterval <= 0 {
		r.CommitLogInterval = 10 * time.Second
	}
	if r.CommitRetries <= 0 {
		r.CommitRetries = 5
	}
	if r.EventBuffer <= 0 {
		r.EventBuffer = 4096
	}
	return r
}
