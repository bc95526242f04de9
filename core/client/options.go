package client

import (
	"log/slog"
	"time"

	"github.com/regroup-mls/regroup/core/algorithm"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/core/recovery"
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

// RecoveryPolicy is the recovery policy of fork-recovery section 8
// (FORK-070): which conversations this client sends readd requests for,
// whether it answers others' requests, and the opt-in repair of a member
// whose epoch secrets diverged. The zero value is the default the
// specification requires: no requests, responses enabled.
type RecoveryPolicy = recovery.Policy

// RecoveryMode selects the conversations a client sends readd requests
// for (FORK-070).
type RecoveryMode = recovery.Mode

const (
	// RecoverNone sends no readd request. It is the default.
	RecoverNone = recovery.None
	// RecoverListed sends requests for the group ids in
	// [RecoveryPolicy.Groups] only.
	RecoverListed = recovery.Listed
	// RecoverAll sends requests for every conversation.
	RecoverAll = recovery.All
)

// Options configure a [Client]. The zero value of every field selects the
// documented default.
type Options struct {
	// DisableCommitLog turns the deployment's commit_log_enabled
	// (CONF-045) off: nothing is recorded, published or read, and every
	// fork state reads unknown (FORK-004). The log is on by default.
	DisableCommitLog bool
	// Recovery is the recovery policy (FORK-070).
	Recovery RecoveryPolicy
	// RecoveryInterval is how often readd requests and responses are
	// attempted while a conversation is forked or a request is kept, and
	// a sixth as often otherwise (COMP-284); default 10s. A conversation becoming forked and a readd
	// request arriving start an attempt at once.
	RecoveryInterval time.Duration
	// ReaddRefreshInterval is the membership refresh interval of
	// FORK-062: after no valid key package was found for an installation
	// to readd, no readd of it starts before it has passed; default 1
	// hour (COMP-204).
	ReaddRefreshInterval time.Duration
	// ReaddRetryDelay defers a readd request that certainly reached
	// nobody before it is sent again; default 1 minute (COMP-201).
	ReaddRetryDelay time.Duration
	// KeyPackageLifetime is the lifetime of published key packages;
	// default 12 weeks (joining-groups section 2).
	KeyPackageLifetime time.Duration
	// WrapperAlgorithm is the Welcome wrapper this installation's key
	// packages advertise; default X-Wing (COMP-127).
	WrapperAlgorithm ports.WrapperAlgorithmID
	// SyncInterval is how often the workers check every topic for
	// envelopes no subscription delivered and read those that moved
	// (COMP-280); default 30s. Subscriptions wake them at
	// once, so this is a safety net.
	SyncInterval time.Duration
	// CommitLogInterval is how often the commit logs are checked: those
	// whose topic moved or whose last sync failed are published and read,
	// and a few others in turn (COMP-282); default 10s. A commit the client applies
	// schedules its conversation's log at once.
	CommitLogInterval time.Duration
	// SubscriptionTopics bounds the topics of one subscription; a client
	// following more opens several (COMP-277). Default 1024, the delivery
	// service's default limit; set it to a service's lower limit.
	SubscriptionTopics int
	// DisableStuckResync keeps a stuck installation (a confirmed commit it
	// cannot process) from resyncing by itself: it reports STUCK and
	// waits for a super admin's re-add ([Conversation.Readd]) or the
	// app's [Conversation.Resync] (COMP-454). Off by default.
	DisableStuckResync bool
	// CommitRetries bounds how often the client rebuilds its own commit
	// after losing a commit race; default 5.
	CommitRetries int
	// EventBuffer bounds undelivered events; default 4096. When the app
	// falls that far behind, the oldest event is dropped and counted
	// ([Client.DroppedEvents]).
	EventBuffer int
	// MaxGroupInfoBytes bounds the GroupInfo published beside a commit
	// (COMP-395); a larger one is left out, and the commit goes alone.
	// Default 1 MiB less 1 KiB: a delivery service's default envelope
	// limit (1 MiB) less the envelope's own framing. A GroupInfo carries
	// the ratchet tree, about 180 bytes per member.
	MaxGroupInfoBytes int
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
	if r.RecoveryInterval <= 0 {
		r.RecoveryInterval = 10 * time.Second
	}
	if r.SubscriptionTopics <= 0 {
		r.SubscriptionTopics = 1024
	}
	if r.CommitRetries <= 0 {
		r.CommitRetries = 5
	}
	if r.EventBuffer <= 0 {
		r.EventBuffer = 4096
	}
	if r.MaxGroupInfoBytes <= 0 {
		r.MaxGroupInfoBytes = 1<<20 - 1<<10
	}
	return r
}
