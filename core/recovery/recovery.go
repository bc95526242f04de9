package recovery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/regroup-mls/regroup/core/algorithm"
	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/core/join"
	"github.com/regroup-mls/regroup/core/keypackage"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

var (
	// ErrConfig reports a Recovery built without a required dependency.
	ErrConfig = errors.New("recovery configuration")
	// ErrWelcomeNotStored is wrapped by a [Host.Commit] of a commit with
	// Welcomes that merged while its Welcomes could not be stored yet: the
	// host keeps them and publishes them again until they are stored.
	ErrWelcomeNotStored = errors.New("welcomes not stored yet")
	// ErrNotSent is wrapped by a [Host.SendOneshot] failure after which no
	// recipient can hold the message: nothing that carries it was stored
	// by the delivery service.
	ErrNotSent = errors.New("one-shot message not sent")
)

// ReaddVersion is the minimum protocol version a group must require
// before a readd commit is published in it (FORK-063): the first version
// whose clients accept a Welcome for a group they were removed from.
var ReaddVersion = metadata.Version{Major: 1, Minor: 6, Patch: 0}

// Defaults of [Options].
const (
	// DefaultRefreshInterval is the membership refresh interval of
	// FORK-062: after a readd found no valid key package for an
	// installation, no readd of it starts again before it has passed.
	DefaultRefreshInterval = time.Hour
	// DefaultRetryDelay is how long a request that certainly reached
	// nobody waits before it is sent again.
	DefaultRetryDelay = time.Minute
)

// Build builds one attempt of an own commit on the group's newest state,
// inside the transaction that stores it; it returns the commit's options
// and the installations its Welcome is for. It must do no I/O other than
// through tx.
type Build func(ctx context.Context, tx ports.Tx, view ports.GroupView) (ports.CommitOptions, []join.Recipient, error)

// Host is what a recovery needs from the client that runs it.
type Host interface {
	// CatchUp processes every envelope of the group's message topic the
	// client has not processed, in order, to the end the delivery service
	// serves. It returns the highest sequence id its reads of the topic
	// reached, junk it read past included (COMP-240): every envelope up
	// to it was read and evaluated, though the stored cursor moved only
	// over those the client authenticated (COMP-271).
	CatchUp(ctx context.Context, groupID []byte) (uint64, error)
	// Commit runs an own commit of the group to its end: it processes the
	// topic, builds the commit with build on the newest state, publishes
	// it, reads it back and merges it, and sends its Welcomes. A commit
	// beaten by a concurrent one is built again, so build runs once per
	// attempt; an error build returns ends the commit with that error. It
	// returns the commit's sequence id.
	Commit(ctx context.Context, groupID []byte, build Build) (uint64, error)
	// SendOneshot creates a one-shot group whose ONESHOT_MESSAGE is msg
	// and adds the given inboxes, and this inbox's other installations,
	// each with every installation whose key package is valid; their
	// installations receive msg as a Welcome. It returns the one-shot
	// group's id. A failure after which no recipient can hold the Welcome
	// wraps [ErrNotSent]. A commit that merged while the delivery service
	// did not store its Welcomes, or left it unknown whether it did,
	// wraps [ErrWelcomeNotStored]: the host keeps those Welcomes and
	// publishes them again until they are stored (COMP-270), so the
	// message is sent, once. Any other failure leaves the outcome unknown
	// and nothing kept.
	SendOneshot(ctx context.Context, msg *contentspb.OneshotMessage, inboxes ...string) ([]byte, error)
}

// Options configure a [Recovery]. Every field but Policy,
// CommitLogDisabled, the durations, Logger and OnEvent is required.
type Options struct {
	Store     ports.Store
	MLS       ports.MLS
	Transport ports.Transport
	Clock     ports.Clock
	// Algorithms holds the wrapper algorithms a readded installation's key
	// package is checked against (JOIN-090).
	Algorithms *algorithm.Registry
	// Installation is this installation's identity.
	Installation identity.Installation
	Host         Host
	Policy       Policy
	// CommitLogDisabled reports the deployment's commit_log_enabled off
	// (CONF-045): every fork state then reads unknown (FORK-004), so no
	// request is sent and no response is published.
	CommitLogDisabled bool
	// RefreshInterval is the membership refresh interval of FORK-062;
	// default [DefaultRefreshInterval].
	RefreshInterval time.Duration
	// RetryDelay defers a request that certainly reached nobody; default
	// [DefaultRetryDelay].
	RetryDelay time.Duration
	Logger     *slog.Logger
	// OnEvent, when set, is told each step of a repair, after the
	// transaction that recorded it commits.
	OnEvent func(Event)
}

// EventKind names a step of a repair.
type EventKind string

const (
	// RequestSent: this installation sent a readd request for GroupID;
	// CommitSequenceID is its latest_commit_sequence_id.
	RequestSent EventKind = "request sent"
	// RequestReceived: a request from InstallationKey passed FORK-053 and
	// is kept.
	RequestReceived EventKind = "request received"
	// RequestDropped: a kept request will never be answered here; Reason
	// says why.
	RequestDropped EventKind = "request dropped"
	// ReaddPublished: this installation's readd commit of InstallationKey
	// was merged at CommitSequenceID.
	ReaddPublished EventKind = "readd published"
	// ReaddDeferred: no valid key package of InstallationKey was found; no
	// readd of it starts before the refresh interval passed (FORK-062).
	ReaddDeferred EventKind = "readd deferred"
	// ReaddWelcomePending: this installation's readd commit of
	// InstallationKey merged at CommitSequenceID but the delivery service
	// did not store its Welcome (Reason says why); the host publishes it
	// again until it is stored (FORK-062) and reports when it is.
	ReaddWelcomePending EventKind = "readd welcome pending"
)

// Event reports one step of a repair.
type Event struct {
	Kind             EventKind
	GroupID          []byte
	InstallationKey  []byte
	CommitSequenceID uint64
	Reason           string
}

// Recovery runs the fork repair of one installation. Its methods are safe
// for concurrent use; passes are serialized.
type Recovery struct {
	o         Options
	validator keypackage.Validator
	pass      sync.Mutex
}

// New returns a Recovery, or an error wrapping [ErrConfig].
func New(o Options) (*Recovery, error) {
	if o.Store == nil || o.MLS == nil || o.Transport == nil || o.Clock == nil || o.Algorithms == nil || o.Host == nil ||
		len(o.Installation.InstallationKey) == 0 || o.Installation.InboxID == "" {
		return nil, fmt.Errorf("%w: every dependency is required", ErrConfig)
	}
	if o.RefreshInterval <= 0 {
		o.RefreshInterval = DefaultRefreshInterval
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = DefaultRetryDelay
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Recovery{o: o, validator: keypackage.Validator{Engine: o.MLS, Wrappers: o.Algorithms}}, nil
}

// Policy returns the recovery policy.
func (r *Recovery) Policy() Policy { return r.o.Policy }

// Pass sends the requests due and answers the requests kept. It returns
// the local failures of both, joined.
func (r *Recovery) Pass(ctx context.Context) error {
	return errors.Join(r.Request(ctx), r.Respond(ctx))
}

func (r *Recovery) tx(ctx context.Context, fn func(tx ports.Tx) error) error {
	return r.o.Store.Tx(ctx, fn)
}

func (r *Recovery) emit(e Event) {
	if r.o.OnEvent != nil {
		r.o.OnEvent(e)
	}
}

// ownKey returns this installation's key.
func (r *Recovery) ownKey() []byte { return []byte(r.o.Installation.PublicKey()) }

// readders returns the permitted readder inboxes of a conversation in
// view: both DM_MEMBERS of a DM, the super admin list of a group (the
// table of section 6, which names the publishers of COMP-090 too).
func readders(ct ports.ConversationType, view ports.GroupView) (map[string]bool, error) {
	return commitlog.MetadataRoles{}.Publishers(ct, view)
}

// leafOf returns the leaf whose signature key is key.
func leafOf(view ports.GroupView, key []byte) (ports.Member, bool) {
	for _, m := range view.Members {
		if bytes.Equal(m.SignatureKey, key) {
			return m, true
		}
	}
	return ports.Member{}, false
}

// groupTopic returns a group's message topic: 0x00 || group id.
func groupTopic(groupID []byte) []byte {
	return append([]byte{byte(ports.TopicGroupMessages)}, groupID...)
}

// getReadd returns the stored status, or the zero status with the keys
// set when none is stored.
func getReadd(ctx context.Context, tx ports.Tx, groupID, key []byte) (ports.ReaddStatus, error) {
	st, err := tx.Readds().Get(ctx, groupID, key)
	if errors.Is(err, ports.ErrNotFound) {
		return ports.ReaddStatus{GroupID: groupID, InstallationKey: key}, nil
	}
	return st, err
}
