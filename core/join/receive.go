package join

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/core/algorithm"
	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// Joined describes a group this installation joined from a Welcome.
type Joined struct {
	GroupID          []byte
	ConversationType ports.ConversationType
	// Adder is the leaf at GroupInfo.signer (JOIN-025).
	Adder ports.Member
	// Anchor is the Welcome's message_cursor.
	Anchor uint64
	// Epoch is the epoch the Welcome installed: the first epoch of the new
	// membership.
	Epoch uint64
	// Replaced reports a Welcome that replaced state the client held.
	Replaced bool
	// WelcomeSequenceID is the Welcome's sequence id on the welcome topic.
	WelcomeSequenceID uint64
}

// Oneshot is a validated Welcome to a one-shot group (conversation type
// 4): the group is never installed or listed (FORK-052); its message is
// handed to [ReceiverOptions.OnOneshot].
type Oneshot struct {
	GroupID []byte
	// Adder is the leaf at GroupInfo.signer (JOIN-025).
	Adder   ports.Member
	Message *contentspb.OneshotMessage
	// WelcomeSequenceID is the Welcome's sequence id on the welcome topic.
	WelcomeSequenceID uint64
}

// Outcome reports a Welcome that was held or rejected, after the
// transaction that recorded it commits. A Welcome held again for the same
// rule is reported once.
type Outcome struct {
	SequenceID uint64
	// GroupID is the group the Welcome names, nil when it was never read.
	GroupID  []byte
	Held     bool
	Rejected bool
	// Rule is the requirement that decided (JOIN-0NN, PROC-020).
	Rule   string
	Reason string
	// Deadline is when a held Welcome's hold ends, zero when none applies.
	Deadline time.Time
}

// Defaults of [ReceiverOptions] (COMP-162, COMP-163).
const (
	DefaultMaxHeld     = 256
	DefaultMaxRejected = 1024
	// DefaultIdentityTimeout bounds one identity lookup (COMP-255).
	DefaultIdentityTimeout = 10 * time.Second
)

// ReceiverOptions configure a [Receiver]. Store, MLS (which must also
// implement [ports.MLSWelcomes]), Transport, Clock, Algorithms,
// Installation, Log, Identity and ProtocolVersion are required.
type ReceiverOptions struct {
	Store     ports.Store
	MLS       ports.MLS
	Transport ports.Transport
	Clock     ports.Clock
	// Algorithms holds the wrapper algorithms and pointee AEADs a Welcome
	// is opened with, looked up by the identifier on the wire (JOIN-076).
	Algorithms   *algorithm.Registry
	Installation identity.Installation
	// Identity resolves the membership a Welcome asserts (JOIN-051).
	Identity ports.Identity
	// ProtocolVersion is this client's protocol version (JOIN-057).
	ProtocolVersion metadata.Version
	// Log starts the commit log's membership in the install transaction.
	Log *commitlog.Log
	// CatchUp processes the group's message topic to its end (JOIN-092).
	// It is called outside any of the receiver's transactions; nil never
	// catches up, so such a Welcome waits for the client's own processing.
	CatchUp func(ctx context.Context, groupID []byte) error
	// OnJoined is called after the transaction that installed a group
	// commits.
	OnJoined func(Joined)
	// OnWelcome is called after a Welcome is held for a new reason or
	// rejected.
	OnWelcome func(Outcome)
	// ReplaceForked, when set, is asked where JOIN-042 alone would refuse
	// a Welcome because the held state is active: true lets the Welcome
	// replace that state, when its epoch is not less than the held one's
	// and whatever its anchor — the opt-in repair of a forked member whose
	// epoch secrets diverged (COMP-205, core/recovery). It runs inside the
	// transaction that read g and held, with the Welcome's adder
	// (JOIN-025), and again in the install transaction. Nil never lets a
	// Welcome replace an active state.
	ReplaceForked func(ctx context.Context, tx ports.Tx, g ports.Group, held ports.GroupView, adder ports.Member) (bool, error)
	// ReplaceStuck, when set, is asked where JOIN-042 alone would refuse
	// a Welcome because the held state is active: true lets a Welcome of
	// a later epoch replace that state once the topic is processed up to
	// the Welcome's anchor (JOIN-043 and JOIN-092 still apply) — the
	// repair of an installation stuck behind a confirmed commit it cannot
	// process (COMP-453). It runs like ReplaceForked. Nil never lets a
	// Welcome replace an active state.
	ReplaceStuck func(ctx context.Context, tx ports.Tx, g ports.Group, held ports.GroupView, adder ports.Member) (bool, error)
	// OnOneshot receives a validated one-shot Welcome. An error wrapping
	// [ErrRejected] rejects the Welcome for good; any other error keeps it
	// for a retry. Nil rejects every one-shot Welcome.
	OnOneshot func(ctx context.Context, o Oneshot) error
	// WelcomeAccepted is told the ref of the key package an installed
	// Welcome was addressed to, so the current package rotates
	// (keypackage.Manager.WelcomeAccepted).
	WelcomeAccepted func(ctx context.Context, ref []byte) error
	// MaxHeld bounds the held Welcomes; past it the oldest is rejected
	// (PROC-020). Default [DefaultMaxHeld].
	MaxHeld int
	// MaxHeldPerSender bounds the held Welcomes of one sender class
	// (COMP-253); past it the class's oldest is rejected (PROC-020).
	// Default [DefaultMaxHeldPerSender].
	MaxHeldPerSender int
	// IdentityTimeout bounds each identity lookup a Welcome's membership
	// needs; a lookup that takes longer keeps the Welcome for a retry
	// (JOIN-085, COMP-255). Default [DefaultIdentityTimeout].
	IdentityTimeout time.Duration
	// MaxRejected bounds the rejection records kept for listing; the
	// oldest are dropped. Default [DefaultMaxRejected].
	MaxRejected int
	// RescanInterval is how often a pass re-reads the welcome topic from
	// its low-water mark (COMP-291). Default [DefaultRescanInterval].
	RescanInterval time.Duration
}

// Receiver processes this installation's welcome topic. Its methods are
// safe for concurrent use; attempts are serialized.
type Receiver struct {
	o        ReceiverOptions
	welcomes ports.MLSWelcomes
	sem      chan struct{}
	// skip is the in-memory read position: every envelope from the
	// durable cursor through skip was read by an earlier pass of this
	// process (COMP-250). Guarded by sem.
	skip uint64
	// ids runs the identity lookups of section 8 (COMP-255).
	ids lookups
	// hosted records the plaintexts plugins returned in the current
	// attempt (COMP-272). Guarded by sem.
	hosted hostedPlain
}

// ErrConfig reports a receiver built without a required dependency.
var ErrConfig = errors.New("join receiver configuration")

// NewReceiver returns a receiver, or an error wrapping [ErrConfig].
func NewReceiver(o ReceiverOptions) (*Receiver, error) {
	if o.Store == nil || o.MLS == nil || o.Transport == nil || o.Clock == nil || o.Algorithms == nil || o.Log == nil ||
		o.Identity == nil || len(o.Installation.InstallationKey) == 0 || o.Installation.InboxID == "" {
		return nil, fmt.Errorf("%w: every dependency is required", ErrConfig)
	}
	if o.ProtocolVersion == (metadata.Version{}) {
		return nil, fmt.Errorf("%w: the client's protocol version is required", ErrConfig)
	}
	w, ok := o.MLS.(ports.MLSWelcomes)
	if !ok {
		return nil, fmt.Errorf("%w: the engine does not implement ports.MLSWelcomes", ErrConfig)
	}
	if o.MaxHeld <= 0 {
		o.MaxHeld = DefaultMaxHeld
	}
	if o.MaxHeldPerSender <= 0 {
		o.MaxHeldPerSender = DefaultMaxHeldPerSender
	}
	if o.IdentityTimeout <= 0 {
		o.IdentityTimeout = DefaultIdentityTimeout
	}
	if o.MaxRejected <= 0 {
		o.MaxRejected = DefaultMaxRejected
	}
	if o.RescanInterval <= 0 {
		o.RescanInterval = DefaultRescanInterval
	}
	return &Receiver{o: o, welcomes: w, sem: make(chan struct{}, 1)}, nil
}

const (
	nsJoin      = "regroup/join"
	keyCursor   = "cursor"
	welcomePage = 100
)

// Topic returns this installation's welcome topic.
func (r *Receiver) Topic() []byte { return WelcomeTopic(r.o.Installation.PublicKey()) }

// Cursor returns the durable read position on the welcome topic: the
// sequence id of the last Welcome that authenticated and below which every
// envelope was read (COMP-250, COMP-290).
func (r *Receiver) Cursor(ctx context.Context) (cur uint64, err error) {
	err = r.o.Store.Tx(ctx, func(tx ports.Tx) error {
		cur, err = cursor(ctx, tx)
		return err
	})
	return cur, err
}

func cursor(ctx context.Context, tx ports.Tx) (uint64, error) {
	b, err := tx.Blobs().Get(ctx, nsJoin, keyCursor)
	if errors.Is(err, ports.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("stored welcome cursor of %d bytes: %w", len(b), ports.ErrInvalid)
	}
	return binary.BigEndian.Uint64(b), nil
}

func setCursor(ctx context.Context, tx ports.Tx, seq uint64) error {
	return tx.Blobs().Put(ctx, nsJoin, keyCursor, binary.BigEndian.AppendUint64(nil, seq))
}

func (r *Receiver) lock(ctx context.Context) (func(), error) {
	select {
	case r.sem <- struct{}{}:
		return func() { <-r.sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Process attempts every held Welcome never attempted, then reads the
// welcome topic after the stored cursor: each page's new envelopes are
// stored as held Welcomes and attempted at once, and the held bounds apply
// to what could not be completed (COMP-253). The cursor moves only over
// Welcomes that authenticated (COMP-290). It
// returns only local failures.
func (r *Receiver) Process(ctx context.Context) error {
	unlock, err := r.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	r.ids.newPass()
	// Welcomes stored by a pass that stopped before attempting them
	// (a crash, a cancelled context) are attempted first.
	ferr := r.attemptAll(ctx, true)
	return errors.Join(ferr, r.read(ctx))
}

// RetryHeld attempts every held Welcome again with the current keys,
// identity state and group state (JOIN-084, JOIN-085). It returns only
// local failures.
func (r *Receiver) RetryHeld(ctx context.Context) error {
	unlock, err := r.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	r.ids.newPass()
	return r.attemptAll(ctx, false)
}

// Held returns the held Welcomes in sequence id order.
func (r *Receiver) Held(ctx context.Context) (hs []ports.HeldWelcome, err error) {
	err = r.o.Store.Tx(ctx, func(tx ports.Tx) error {
		hs, err = tx.HeldWelcomes().List(ctx)
		return err
	})
	return hs, err
}

// attemptAll attempts the held Welcomes in sequence id order; fresh
// selects only those never attempted. A local failure of one Welcome
// does not stop the others; the failures are joined.
func (r *Receiver) attemptAll(ctx context.Context, fresh bool) error {
	hs, err := r.Held(ctx)
	if err != nil {
		return fmt.Errorf("list held welcomes: %w", err)
	}
	var errs []error
	for _, h := range hs {
		if fresh && h.Attempts > 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := r.attempt(ctx, h); err != nil {
			errs = append(errs, fmt.Errorf("welcome %d: %w", h.SequenceID, err))
		}
	}
	evicted, err := r.enforceBound(ctx)
	r.report(evicted...)
	return errors.Join(append(errs, err)...)
}

func (r *Receiver) report(outs ...Outcome) {
	if r.o.OnWelcome == nil {
		return
	}
	for _, o := range outs {
		r.o.OnWelcome(o)
	}
}

// decodeHeld returns the envelope a held Welcome stores.
func decodeHeld(h ports.HeldWelcome) (*backendpb.OriginatorEnvelope, error) {
	var env backendpb.OriginatorEnvelope
	if err := proto.Unmarshal(h.Envelope, &env); err != nil {
		return nil, reject("JOIN-048", "stored envelope does not decode: %v", err)
	}
	return &env, nil
}
