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
// # Errors
//
// Refused envelopes and malformed queries wrap [ports.ErrInvalidArgument]
// with the reason; requests that need an identity the caller lacks wrap
// [ports.ErrUnauthenticated].
package delivery

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

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
	// MaxPageBytes caps the serialized envelopes of one Query page (a page
	// holds at least one envelope); default 4 MiB, so that a page fits a
	// transport message.
	MaxPageBytes int
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
	def(&r.MaxPageBytes, 4<<20)
	def(&r.MaxCursors, 1024)
	return r
}

// errNoClock is the failure of a call that needs time on a service built
// without a clock.
var errNoClock = fmt.Errorf("%w: delivery service has no clock (Options.Clock is nil)", ports.ErrUnavailable)

// Service is the delivery service. It is safe for concurrent use.
type Service struct {
	store ports.EnvelopeStore
	opts  Options
	hub   *hub
}

var _ ports.DeliveryService = (*Service)(nil)

// New returns a service keeping its envelopes in store. The caller keeps
// ownership of store and closes it after the service's last use.
func New(store ports.EnvelopeStore, opts *Options) *Service {
	return &Service{store: store, opts: opts.withDefaults(), hub: newHub()}
}

// Publish admits every envelope and stores the batch atomically; it
// returns the sequence id of each, in order. A refused envelope fails the
// whole batch with an error wrapping [ports.ErrInvalidArgument] that names
// the envelope's index and the reason. Publishing needs an authenticated
// caller.
func (s *Service) Publish(ctx context.Context, caller ports.Caller, envs []*backendpb.ClientEnvelope) ([]uint64, error) {
	if !caller.Authenticated() {
		return nil, fmt.Errorf("publish: %w: publishing needs an authenticated connection", ports.ErrUnauthenticated)
	}
	if len(envs) == 0 {
		return nil, fmt.Errorf("publish: %w: empty batch", ports.ErrInvalidArgument)
	}
	if len(envs) > s.opts.MaxBatch {
		return nil, fmt.Errorf("publish: %w: batch of %d envelopes, limit %d", ports.ErrInvalidArgument, len(envs), s.opts.MaxBatch)
	}
	if s.opts.Clock == nil {
		return nil, fmt.Errorf("publish: %w", errNoClock)
	}
	now := s.opts.Clock.Now()
	rows := make([]ports.NewStoredEnvelope, len(envs))
	for i, env := range envs {
		kind, err := s.admit(ctx, env)
		if err == nil {
			err = admitPublisher(caller, env)
		}
		if err != nil {
			return nil, fmt.Errorf("publish: envelope %d: %w", i, err)
		}
		raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(env)
		if err != nil {
			return nil, fmt.Errorf("publish: envelope %d: %w: %v", i, ports.ErrInvalidArgument, err)
		}
		rows[i] = ports.NewStoredEnvelope{
			Topic:             env.GetTargetTopic(),
			Envelope:          raw,
			ServerTimestampNS: now.UnixNano(),
			ExpiresAtNS:       s.expiry(kind, now),
		}
	}
	ids, err := s.store.Append(ctx, rows)
	if err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	for _, r := range rows {
		s.hub.notify(r.Topic)
	}
	return ids, nil
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
// group-message topics need an authenticated caller; commit-log and
// welcome topics are capabilities, identity updates and key packages are
// public.
func checkRead(caller ports.Caller, topic []byte) (ports.TopicKind, error) {
	kind, _, err := ParseTopic(topic)
	if err != nil {
		return 0, err
	}
	if kind == ports.TopicGroupMessages && !caller.Authenticated() {
		return 0, fmt.Errorf("%w: reading a group-message topic needs an authenticated connection", ports.ErrUnauthenticated)
	}
	return kind, nil
}

// Query returns up to limit envelopes of topic with sequence id > after,
// ascending (API-201). limit <= 0 selects the default page size and a
// larger one than the maximum is capped. Key-package topics are read with
// [Service.QueryNewest] only.
func (s *Service) Query(ctx context.Context, caller ports.Caller, topic []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error) {
	kind, err := checkRead(caller, topic)
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	if kind == ports.TopicKeyPackages {
		return nil, fmt.Errorf("query: %w: key-package topics are read with QueryNewest", ports.ErrInvalidArgument)
	}
	return s.rangeTopic(ctx, topic, after, limit)
}

func (s *Service) rangeTopic(ctx context.Context, topic []byte, after uint64, limit int) ([]*backendpb.OriginatorEnvelope, error) {
	if limit <= 0 {
		limit = s.opts.DefaultPageSize
	}
	if limit > s.opts.MaxPageSize {
		limit = s.opts.MaxPageSize
	}
	rows, err := s.store.Range(ctx, topic, after, limit)
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	out := make([]*backendpb.OriginatorEnvelope, 0, len(rows))
	size := 0
	for _, r := range rows {
		size += len(r.Envelope) + 32
		if size > s.opts.MaxPageBytes && len(out) > 0 {
			break // a shorter page: the reader continues from its last id
		}
		e, err := decodeStored(r)
		if err != nil {
			return nil, fmt.Errorf("query: %w", err)
		}
		out = append(out, e)
	}
	return out, nil
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
	}, nil
}

// QueryNewest returns the envelope with the highest sequence id on topic,
// or an error wrapping [ports.ErrNotFound] when the topic holds none.
func (s *Service) QueryNewest(ctx context.Context, caller ports.Caller, topic []byte) (*backendpb.OriginatorEnvelope, error) {
	if _, err := checkRead(caller, topic); err != nil {
		return nil, fmt.Errorf("query newest: %w", err)
	}
	r, err := s.store.Newest(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("query newest: %w", err)
	}
	return decodeStored(r)
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
	return n, nil
}

// Authenticate verifies an Ed25519ctx signature with context
// [ports.AuthContext] over challenge under the 32-byte installationKey.
func (s *Service) Authenticate(_ context.Context, challenge, installationKey, signature []byte) (ports.Caller, error) {
	if len(challenge) < 16 {
		return ports.Caller{}, fmt.Errorf("authenticate: %w: challenge shorter than 16 bytes", ports.ErrUnauthenticated)
	}
	if len(installationKey) != ed25519.PublicKeySize {
		return ports.Caller{}, fmt.Errorf("authenticate: %w: installation key is %d bytes, want 32", ports.ErrUnauthenticated, len(installationKey))
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
