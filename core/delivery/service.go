// Package delivery is regroup's delivery service: it admits envelopes,
// has the store assign each a sequence id in the database transaction
// that stores it, serves ordered reads, and streams new envelopes to
// subscribers (companion definitions: topics, sequence ids, publish
// signature).
//
// A [Service] implements [ports.DeliveryService] over a
// [ports.EnvelopeStore]; server adapters (gRPC) and in-process transports
// serve it.
//
// # Ordering
//
// Sequence ids come from one counter shared by every topic of the service
// (COMP-041): they start at 1 with the service's first envelope, strictly
// increase on every topic (with gaps, since other topics take ids in
// between), are never reused, and a publish that starts after an envelope
// is visible gets a higher id than it, on any topic (API-286 to API-289),
// so the specs can compare ids of different topics (FORK-077, JOIN-037,
// JOIN-050). The store never makes an id of a topic visible before a lower
// one of the same topic, and subscribers are woken only after a commit and
// re-read from their cursor, so no reader misses an envelope.
//
// # Resources
//
// A subscription reads only the topics woken since its last read, one
// page at a time when its reader asks for an envelope (COMP-140); pages
// are capped in rows and in stored bytes by the store as it reads
// (COMP-141), and every page a read holds counts against one read budget
// (Options.ReadBudgetBytes), shared between the principals the transport
// names for each call (COMP-321). Identity updates and key packages, like
// commit-log entries, are stored once per topic (COMP-324), and each
// installation's stored bytes per topic kind are bounded by quotas
// (COMP-325). Every publish wakes its topics' subscribers,
// whatever the store answered (COMP-142). A sealed commit-log entry is
// stored once per topic (COMP-144).
//
// # Metrics
//
// An [Observer] (Options.Observer) hears every stored publish with its
// envelopes' topic kinds ([KindName]) and duration, every refused publish
// with its reason (the Refused constants), and every envelope a
// subscription hands out with its lag. [Service.ReadBudgetInUse] reports
// the read budget held.
//
// # Errors
//
// Refused envelopes and malformed queries (a cursor above 2^63-1 among
// them, COMP-143) wrap [ports.ErrInvalidArgument] with the reason;
// requests that need an identity the caller lacks wrap
// [ports.ErrUnauthenticated]; a read that could not get read budget
// before its ctx ended, and store failures, wrap [ports.ErrUnavailable].
package delivery

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/internal/edkey"
	"github.com/regroup-mls/regroup/internal/fairshare"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// Options configures a [Service]. The zero value of every field selects
// its documented default.
type Options struct {
	// Clock stamps envelopes and drives retention. It is required (core
	// reads time only through ports.Clock): without one, Publish,
	// SweepExpired and RunRetention fail with an error wrapping
	// [ports.ErrUnavailable] that names the missing clock.
	Clock ports.Clock
	// MaxEnvelopeBytes bounds the serialized size of one ClientEnvelope;
	// default 1 MiB.
	MaxEnvelopeBytes int
	// MaxBatch bounds the envelopes in one Publish; default 256.
	MaxBatch int
	// DefaultPageSize is the page a Query with limit <= 0 returns; default 100.
	DefaultPageSize int
	// MaxPageSize caps a Query's limit; default 1000.
	MaxPageSize int
	// MaxPageBytes caps the stored envelopes of one page, of a Query or of
	// a subscription's read (a page holds at least one envelope); the
	// store applies it in the database (COMP-141). Default 2 MiB: twice
	// the default envelope limit, so that a page of small envelopes is
	// known to have reached its topic's end without another read.
	MaxPageBytes int
	// ReadBudgetBytes bounds, across the whole service, the bytes of
	// stored envelopes that reads hold in memory: a Query page until the
	// call returns, a subscription's page until each envelope has been
	// handed out and the caller came back for the next (COMP-140). A read
	// waits (within its ctx) for budget to free up. Default 256 MiB; it is
	// raised to one page when smaller.
	ReadBudgetBytes int64
	// SharedPageBytes bounds the pages that subscriptions at the same
	// cursor of a topic share, read and decoded once for all of them, and
	// a transport's responses encoded once from them, each charged once
	// to the read budget (COMP-555 to COMP-557). Default an eighth of
	// ReadBudgetBytes, at least four pages (raised to two); negative turns
	// sharing off (every subscription reads its own page).
	SharedPageBytes int64
	// MaxCursors bounds the topics of one subscription; default 1024.
	MaxCursors int
	// PollInterval, when positive, makes each subscription re-read its
	// topics that often even when nothing woke it. Appends through this
	// service wake subscriptions at once, and a store that implements
	// [ports.EnvelopeWatcher] reports other processes' appends (see
	// [Service.WatchStore]), so polling is only a safety net; 0 disables it.
	PollInterval time.Duration
	// Retention is how long envelopes of a topic kind are kept; a missing
	// or zero entry keeps them forever. Commit-log envelopes never expire,
	// whatever this says (OPS-001).
	Retention map[ports.TopicKind]time.Duration
	// KeyPackageValidator parses and checks published key packages
	// (JOIN-090). Nil applies only the structural checks: a key package
	// must be non-empty on a 32-byte key-package topic.
	KeyPackageValidator KeyPackageValidator
	// Observer, when set, receives every publish, refusal and delivery
	// (metrics).
	Observer Observer
	// PublicGroups, when set, turns commit acceptance on (see
	// acceptance.go): the service follows every registered group's public
	// state with it and refuses commits and GroupInfos that fail. It needs
	// a store that implements [ports.PublicStateStore] and a validator
	// that implements [ports.PublicStateViewer]; without them every
	// publish fails with an error wrapping [ports.ErrUnavailable]. Nil
	// (the default) stores group messages unchecked.
	PublicGroups ports.PublicGroups
	// TwoPhase, with PublicGroups, runs commit acceptance in two phases
	// (twophase.go): commits by inboxes that are not super admins wait as
	// their group's pending commit for witnesses' reports. It needs a
	// store that implements [ports.AcceptanceStore]; without it (or
	// without PublicGroups) every publish fails with an error wrapping
	// [ports.ErrUnavailable]. Nil (the default) takes every accepted
	// commit at once.
	TwoPhase *TwoPhaseOptions
	// CatchUpWindow, with PublicGroups, is how long a group a restore put
	// in catch-up stays in it without taking an uploaded commit
	// (catchup.go); 0 selects [DefaultCatchUpWindow].
	CatchUpWindow time.Duration
	// Quotas bound the bytes one installation key stores per topic kind
	// and window (COMP-325); nil selects [DefaultQuotas], a kind missing
	// from a non-nil map or with Bytes <= 0 has none. A publish beyond a
	// quota fails with an error wrapping [ErrQuotaExceeded] and
	// [ports.ErrRateLimited].
	Quotas map[ports.TopicKind]Quota
}

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&r.MaxEnvelopeBytes, 1<<20)
	def(&r.MaxBatch, 256)
	def(&r.DefaultPageSize, 100)
	def(&r.MaxPageSize, 1000)
	def(&r.MaxPageBytes, 2<<20)
	def(&r.MaxCursors, 1024)
	if r.Observer == nil {
		r.Observer = noObserver{}
	}
	if r.Quotas == nil {
		r.Quotas = DefaultQuotas()
	}
	if r.ReadBudgetBytes <= 0 {
		r.ReadBudgetBytes = 256 << 20
	}
	r.ReadBudgetBytes = max(r.ReadBudgetBytes, int64(r.pageGrant()))
	if r.SharedPageBytes == 0 {
		r.SharedPageBytes = max(r.ReadBudgetBytes/8, 4*int64(r.pageGrant()))
	}
	return r
}

// pageGrant is the read budget one page read takes before it knows its
// size: a page of MaxPageBytes, or one envelope of the largest size
// admitted, whichever is larger.
func (o *Options) pageGrant() int {
	return max(o.MaxPageBytes, o.MaxEnvelopeBytes)
}

// errNoClock is the failure of a call that needs time on a service built
// without a clock.
var errNoClock = fmt.Errorf("%w: delivery service has no clock (Options.Clock is nil)", ports.ErrUnavailable)

// Service is the delivery service. It is safe for concurrent use.
type Service struct {
	store  ports.EnvelopeStore
	opts   Options
	hub    *hub
	budget *fairshare.Budget
	// shared holds the pages subscriptions share (sharedpages.go), nil
	// when sharing is off.
	shared *sharedPages
	quotas *quotas
	// admitted: identity updates admitted lately (replay.go)
	admitted *admitted
	// states and viewer serve commit acceptance; acceptErr says why it
	// cannot run when Options.PublicGroups is set.
	states    ports.PublicStateStore
	viewer    ports.PublicStateViewer
	acceptErr error
	// acc, tp and wake serve two phases (twophase.go); acc is nil when
	// they are off.
	acc  ports.AcceptanceStore
	tp   TwoPhaseOptions
	wake chan struct{}
	// notCatchingUp holds the groups seen out of catch-up (catchup.go):
	// only an offline restore puts a group in it.
	notCatchingUp sync.Map
}

var _ ports.DeliveryService = (*Service)(nil)

// New returns a service keeping its envelopes in store. The caller keeps
// ownership of store and closes it after the service's last use.
func New(store ports.EnvelopeStore, opts *Options) *Service {
	o := opts.withDefaults()
	s := &Service{store: store, opts: o, hub: newHub(), budget: fairshare.New(o.ReadBudgetBytes, int64(o.pageGrant())),
		quotas: newQuotas(o.Quotas), admitted: newAdmitted()}
	if o.SharedPageBytes > 0 {
		s.shared = newSharedPages(s.budget, max(o.SharedPageBytes, 2*int64(o.pageGrant())), int64(o.pageGrant()))
		s.hub.pages = s.shared
	}
	if o.PublicGroups != nil {
		var ok bool
		if s.states, ok = store.(ports.PublicStateStore); !ok {
			s.acceptErr = fmt.Errorf("%w: commit acceptance is on but the envelope store %T keeps no public states", ports.ErrUnavailable, store)
		} else {
			s.states = newCachingStates(s.states) // COMP-404
		}
		if s.viewer, ok = o.PublicGroups.(ports.PublicStateViewer); !ok {
			s.acceptErr = fmt.Errorf("%w: commit acceptance is on but the validator %T cannot view a stored state", ports.ErrUnavailable, o.PublicGroups)
		}
	}
	s.setupTwoPhase()
	return s
}

// Accepting reports whether the service checks commits against their
// groups' public states (Options.PublicGroups).
func (s *Service) Accepting() bool { return s.opts.PublicGroups != nil }

// Publish admits every envelope and stores the batch atomically; it
// returns the sequence id of each, in order. A refused envelope fails the
// whole batch with an error wrapping [ports.ErrInvalidArgument] that names
// the envelope's index and the reason. Publishing needs an authenticated
// caller.
func (s *Service) Publish(ctx context.Context, caller ports.Caller, envs []*backendpb.ClientEnvelope) ([]uint64, error) {
	start := time.Now()
	kinds, ids, err := s.publish(ctx, caller, envs)
	if err != nil {
		var kind string
		if len(envs) > 0 {
			kind = KindName(envs[0].GetTargetTopic())
		}
		var r *refusal
		if errors.As(err, &r) && r.kind != "" {
			kind = r.kind
		}
		s.opts.Observer.Refused(kind, reasonOf(err, RefusedUnavailable))
		return nil, fmt.Errorf("publish: %w", err)
	}
	s.opts.Observer.Published(kinds, time.Since(start))
	return ids, nil
}

// publish is Publish without the observer: it returns the kind of each
// envelope stored, and the ids.
func (s *Service) publish(ctx context.Context, caller ports.Caller, envs []*backendpb.ClientEnvelope) ([]string, []uint64, error) {
	if !caller.Authenticated() {
		return nil, nil, because(RefusedUnauthenticated, fmt.Errorf("%w: publishing needs an authenticated connection", ports.ErrUnauthenticated))
	}
	if len(envs) == 0 {
		return nil, nil, because(RefusedBatch, fmt.Errorf("%w: empty batch", ports.ErrInvalidArgument))
	}
	if len(envs) > s.opts.MaxBatch {
		return nil, nil, because(RefusedBatch, fmt.Errorf("%w: batch of %d envelopes, limit %d", ports.ErrInvalidArgument, len(envs), s.opts.MaxBatch))
	}
	if s.opts.Clock == nil {
		return nil, nil, errNoClock
	}
	now := s.opts.Clock.Now()
	rows := make([]ports.NewStoredEnvelope, len(envs))
	kinds := make([]string, len(envs))
	for i, env := range envs {
		kind, err := s.admitOnce(ctx, env)
		if err == nil {
			err = because(RefusedPublisher, admitPublisher(caller, env))
		}
		if err != nil {
			return nil, nil, &refusal{reason: reasonOf(err, RefusedPayload), kind: KindName(env.GetTargetTopic()),
				err: fmt.Errorf("envelope %d: %w", i, err)}
		}
		raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(env)
		if err != nil {
			return nil, nil, because(RefusedPayload, fmt.Errorf("envelope %d: %w: %v", i, ports.ErrInvalidArgument, err))
		}
		kinds[i] = KindName(env.GetTargetTopic())
		rows[i] = ports.NewStoredEnvelope{
			Topic:             env.GetTargetTopic(),
			Envelope:          raw,
			ServerTimestampNS: now.UnixNano(),
			ExpiresAtNS:       s.expiry(kind, now),
			DedupKey:          dedupKey(kind, env),
		}
	}
	var advances []ports.PublicStateAdvance
	if s.opts.PublicGroups != nil {
		if s.acceptErr != nil {
			return nil, nil, s.acceptErr
		}
		var err error
		ctx = withCaller(ctx, caller) // catchup.go
		if advances, err = s.acceptChecked(ctx, envs, rows); err != nil {
			return nil, nil, err
		}
	}
	// A user who left is refused as such first, a viewer included: its
	// messages are refused because it left, whatever its role.
	leaves, err := s.checkLeaves(ctx, caller, envs) // leave requests (leave.go)
	if err != nil {
		return nil, nil, err
	}
	if s.opts.PublicGroups != nil {
		if err = s.admitViewerMessages(ctx, caller, envs); err != nil { // COMP-403
			return nil, nil, err
		}
		if err = s.admitBlocked(ctx, caller, envs); err != nil { // COMP-501
			return nil, nil, err
		}
	}
	stored := map[ports.TopicKind]int64{}
	for _, r := range rows {
		stored[ports.TopicKind(r.Topic[0])] += int64(len(r.Envelope))
	}
	if err := s.quotas.take(caller.InstallationKey, stored, now); err != nil {
		return nil, nil, &refusal{reason: RefusedQuota, kind: kinds[0], err: err}
	}
	if err := s.recordLeaves(ctx, leaves); err != nil {
		return nil, nil, err
	}
	var out []uint64
	for attempt := 0; ; attempt++ {
		if len(advances) == 0 {
			out, err = s.store.Append(ctx, rows)
		} else {
			out, err = s.appendWithState(ctx, rows, advances, now)
		}
		if !errors.Is(err, ports.ErrStateMoved) || attempt >= maxStateRetries {
			break
		}
		// A concurrent commit advanced a group first: check the batch
		// again against the state it left.
		if advances, err = s.acceptChecked(ctx, envs, rows); err != nil {
			return nil, nil, err
		}
	}
	// COMP-142: wake the topics' subscribers whatever Append returned. It
	// returns only after its transaction ended, and a failure (a caller
	// that gave up, a lost connection) may still have committed: skipping
	// the wake would leave subscribers behind until the next publish.
	for _, r := range rows {
		s.hub.notify(r.Topic)
	}
	if err != nil {
		return nil, nil, err
	}
	s.accepted(advances)
	s.afterStored(ctx, leaves, out, advances)
	return kinds, out, nil
}

// appendWithState stores rows with the advances, and the notices of
// pending commits they supersede (pending.go); it returns the ids of
// rows.
func (s *Service) appendWithState(ctx context.Context, rows []ports.NewStoredEnvelope, advances []ports.PublicStateAdvance, now time.Time) ([]uint64, error) {
	all, adv, pos, err := withSupersededNotices(rows, advances, now)
	if err != nil {
		return nil, err
	}
	ids, err := s.states.AppendWithState(ctx, all, adv)
	if err != nil || len(all) == len(rows) {
		return ids, err
	}
	out := make([]uint64, len(rows))
	for i, p := range pos {
		out[i] = ids[p]
	}
	return out, nil
}

func (s *Service) expiry(kind ports.TopicKind, now time.Time) int64 {
	if kind == ports.TopicCommitLog {
		return 0 // OPS-001: commit-log envelopes never expire.
	}
	if d := s.opts.Retention[kind]; d > 0 {
		return now.Add(d).UnixNano()
	}
	return 0
}

// checkRead validates a topic for reading and applies the access policy:
// group-message and GroupInfo topics need an authenticated caller (a
// GroupInfo's tree names the members); commit-log and
// welcome topics are capabilities, identity updates and key packages are
// public.
func checkRead(caller ports.Caller, topic []byte) (ports.TopicKind, error) {
	kind, _, err := ParseTopic(topic)
	if err != nil {
		return 0, err
	}
	if (kind == ports.TopicGroupMessages || kind == ports.TopicGroupInfo) && !caller.Authenticated() {
		return 0, fmt.Errorf("%w: reading topic kind 0x%02x needs an authenticated connection", ports.ErrUnauthenticated, byte(kind))
	}
	return kind, nil
}

// Query returns up to limit envelopes of topic with sequence id > after,
// ascending (API-201). limit <= 0 selects the default page size and a
// larger one than the maximum is capped; the page also stops at
// MaxPageBytes of stored envelopes (at least one envelope). A cursor
// above 2^63-1 is refused (COMP-143). Key-package topics are read with
// [Service.QueryNewest] only.
func (s *Service) Query(ctx context.Context, caller ports.Caller, topic []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error) {
	kind, err := checkRead(caller, topic)
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	if kind == ports.TopicKeyPackages {
		return nil, fmt.Errorf("query: %w: key-package topics are read with QueryNewest", ports.ErrInvalidArgument)
	}
	if err := checkCursor(after); err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	if limit <= 0 {
		limit = s.opts.DefaultPageSize
	}
	hold := s.newHold(ctx)
	page, _, _, err := s.readPage(ctx, hold, topic, after, limit)
	if err == nil {
		page, err = s.leftPage(ctx, caller, topic, page) // leave.go
	}
	if err != nil {
		hold.Close()
		return nil, fmt.Errorf("query: %w", err)
	}
	// The page is the caller's now: a transport that sends it keeps its
	// budget until it has been written (COMP-322), others let it go.
	fairshare.Keep(ctx, hold)
	return page, nil
}

// checkCursor refuses a cursor no sequence id can exceed: ids are signed
// 64-bit integers in the database, so a cursor above 2^63-1 is malformed
// (COMP-143), not a request for nothing.
func checkCursor(after uint64) error {
	if after > math.MaxInt64 {
		return invalid("cursor %d is above the highest possible sequence id 2^63-1", after)
	}
	return nil
}

// readPage reads up to limit envelopes of topic after the cursor, capped
// at MaxPageSize rows and MaxPageBytes stored bytes, under the read
// budget: it returns the page, each envelope's stored size, and the
// budget it added to hold for them (their total), which the caller
// releases.
func (s *Service) readPage(ctx context.Context, hold *fairshare.Hold, topic []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, []int64, int64, error) {
	limit = min(limit, s.opts.MaxPageSize)
	grant := int64(s.opts.pageGrant())
	if err := hold.Grow(ctx, grant); err != nil {
		return nil, nil, 0, fmt.Errorf("%w: waiting for read budget: %w", ports.ErrUnavailable, err)
	}
	rows, err := s.store.Range(ctx, topic, after, limit, s.opts.MaxPageBytes)
	if err != nil {
		hold.Release(grant)
		return nil, nil, 0, err
	}
	var got int64
	sizes := make([]int64, len(rows))
	for i, r := range rows {
		sizes[i] = int64(len(r.Envelope))
		got += sizes[i]
	}
	if got > grant {
		// Envelopes stored under a larger size limit than today's.
		if err := hold.Grow(ctx, got-grant); err != nil {
			hold.Release(grant)
			return nil, nil, 0, fmt.Errorf("%w: waiting for read budget: %w", ports.ErrUnavailable, err)
		}
	} else {
		hold.Release(grant - got)
	}
	out := make([]*backendpb.OriginatorEnvelope, 0, len(rows))
	for _, r := range rows {
		e, err := decodeStored(r)
		if err != nil {
			hold.Release(got)
			return nil, nil, 0, err
		}
		out = append(out, e)
	}
	return out, sizes, got, nil
}

// mayContinue reports whether a page of n envelopes holding got bytes
// may have stopped before the topic's end: it hit the row limit, or the
// next envelope may not have fitted the byte cap.
func (s *Service) mayContinue(n int, got int64) bool {
	return n > 0 && (n >= s.opts.MaxPageSize || got+int64(s.opts.MaxEnvelopeBytes) > int64(s.opts.MaxPageBytes))
}

func decodeStored(r ports.StoredEnvelope) (*backendpb.OriginatorEnvelope, error) {
	env := new(backendpb.ClientEnvelope)
	if err := proto.Unmarshal(r.Envelope, env); err != nil {
		return nil, fmt.Errorf("stored envelope %d is corrupt: %v", r.SequenceID, err)
	}
	return &backendpb.OriginatorEnvelope{
		SequenceId:        r.SequenceID,
		ServerTimestampNs: r.ServerTimestampNS,
		Envelope:          env,
		Pending:           r.Pending,
	}, nil
}

// QueryNewest returns the envelope with the highest sequence id on topic,
// or an error wrapping [ports.ErrNotFound] when the topic holds none.
func (s *Service) QueryNewest(ctx context.Context, caller ports.Caller, topic []byte) (*backendpb.OriginatorEnvelope, error) {
	if _, err := checkRead(caller, topic); err != nil {
		return nil, fmt.Errorf("query newest: %w", err)
	}
	// COMP-323: the envelope read counts against the read budget like a
	// Query page, so a flood of QueryNewest waits on its own share.
	hold := s.newHold(ctx)
	grant := int64(s.opts.pageGrant())
	if err := hold.Grow(ctx, grant); err != nil {
		hold.Close()
		return nil, fmt.Errorf("query newest: %w: waiting for read budget: %w", ports.ErrUnavailable, err)
	}
	r, err := s.store.Newest(ctx, topic)
	if through, left, lerr := s.leftThrough(ctx, caller, topic); err == nil && (lerr != nil || left && r.SequenceID > through) {
		err = lerr // leave.go: nothing above the leave request
		if err == nil {
			err = fmt.Errorf("%w: nothing newer than the leave request", ports.ErrNotFound)
		}
	}
	if err != nil {
		hold.Close()
		return nil, fmt.Errorf("query newest: %w", err)
	}
	if n := int64(len(r.Envelope)); n < grant {
		hold.Release(grant - n)
	}
	e, err := decodeStored(r)
	if err != nil {
		hold.Close()
		return nil, err
	}
	fairshare.Keep(ctx, hold)
	return e, nil
}

// HighestSequenceID returns the highest sequence id ever assigned on
// topic, 0 when none was (API-244). It stays the same after a retention
// sweep deletes the envelope, so an id is never handed out twice.
func (s *Service) HighestSequenceID(ctx context.Context, caller ports.Caller, topic []byte) (uint64, error) {
	if _, err := checkRead(caller, topic); err != nil {
		return 0, fmt.Errorf("highest sequence id: %w", err)
	}
	n, err := s.store.Highest(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("highest sequence id: %w", err)
	}
	if through, left, err := s.leftThrough(ctx, caller, topic); err != nil {
		return 0, fmt.Errorf("highest sequence id: %w", err)
	} else if left {
		n = min(n, through) // leave.go
	}
	return n, nil
}

// Authenticate verifies an Ed25519ctx signature with context
// [ports.AuthContext] over challenge under the 32-byte installationKey.
func (s *Service) Authenticate(_ context.Context, challenge, installationKey, signature []byte) (ports.Caller, error) {
	if len(challenge) < 16 {
		return ports.Caller{}, fmt.Errorf("authenticate: %w: challenge shorter than 16 bytes", ports.ErrUnauthenticated)
	}
	if err := edkey.Check(installationKey); err != nil {
		// COMP-320: a small-order key verifies signatures nobody made.
		return ports.Caller{}, fmt.Errorf("authenticate: %w: installation key: %v", ports.ErrUnauthenticated, err)
	}
	err := ed25519.VerifyWithOptions(ed25519.PublicKey(installationKey), challenge, signature,
		&ed25519.Options{Context: ports.AuthContext})
	if err != nil {
		return ports.Caller{}, fmt.Errorf("authenticate: %w: challenge signature does not verify", ports.ErrUnauthenticated)
	}
	return ports.Caller{InstallationKey: append([]byte(nil), installationKey...)}, nil
}

// SweepExpired deletes every envelope whose retention has passed and
// returns how many it deleted. Commit-log envelopes are never deleted.
func (s *Service) SweepExpired(ctx context.Context) (int64, error) {
	if s.opts.Clock == nil {
		return 0, fmt.Errorf("sweep expired: %w", errNoClock)
	}
	n, err := s.store.DeleteExpired(ctx, s.opts.Clock.Now().UnixNano())
	if err != nil {
		return 0, fmt.Errorf("sweep expired: %w", err)
	}
	if err := s.sweepReports(ctx); err != nil {
		return n, fmt.Errorf("sweep expired: %w", err)
	}
	return n, nil
}

// WatchStore forwards the store's reports of appends made by other
// processes sharing the database to this service's subscriptions, until
// ctx ends (see [ports.EnvelopeWatcher]). It returns nil at once when the
// store cannot report them.
func (s *Service) WatchStore(ctx context.Context) error {
	w, ok := s.store.(ports.EnvelopeWatcher)
	if !ok {
		return nil
	}
	return w.Watch(ctx, func(topic []byte) {
		if topic == nil {
			s.hub.notifyAll()
			return
		}
		s.hub.notify(topic)
	})
}

// RunRetention calls [Service.SweepExpired] every interval until ctx ends;
// report, if not nil, receives each sweep's outcome.
func (s *Service) RunRetention(ctx context.Context, interval time.Duration, report func(deleted int64, err error)) {
	if s.opts.Clock == nil {
		if report != nil {
			report(0, fmt.Errorf("retention: %w", errNoClock))
		}
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.opts.Clock.After(interval):
		}
		n, err := s.SweepExpired(ctx)
		if report != nil {
			report(n, err)
		}
	}
}
