package identity

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// ResolverOptions configure a [Resolver]. Store, Transport and Clock are
// required; zero durations select the defaults.
type ResolverOptions struct {
	// Store holds the identity updates fetched so far (its IdentityCache).
	Store ports.Store
	// Transport reads identity-update topics.
	Transport ports.Transport
	// Clock measures the retry window.
	Clock ports.Clock
	// RetryWindow is how long AssociationState keeps fetching an inbox's
	// updates for a sequence id it has not seen before it answers
	// ErrNotFound (JOIN-059); default 1 minute (COMP-124).
	RetryWindow time.Duration
	// RetryInterval is the pause between two fetches; default 2 seconds.
	RetryInterval time.Duration
	// PageSize is the page a fetch asks for; default 500.
	PageSize int
}

// Resolver implements [ports.Identity]: it answers from the identity
// updates held in the store and fetches an inbox's missing updates from its
// topic. It is safe for concurrent use.
type Resolver struct {
	opts ResolverOptions
}

var _ ports.Identity = (*Resolver)(nil)

// errMissingDeps is returned by NewResolver for options without a store,
// transport or clock.
var errMissingDeps = errors.New("identity resolver needs a store, a transport and a clock")

// NewResolver returns a resolver. It fails when Store, Transport or Clock
// is nil.
func NewResolver(opts ResolverOptions) (*Resolver, error) {
	if opts.Store == nil || opts.Transport == nil || opts.Clock == nil {
		return nil, errMissingDeps
	}
	if opts.RetryWindow <= 0 {
		opts.RetryWindow = time.Minute
	}
	if opts.RetryInterval <= 0 {
		opts.RetryInterval = 2 * time.Second
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 500
	}
	return &Resolver{opts: opts}, nil
}

// held returns the inbox's held records through seq and the highest
// sequence id held.
func (r *Resolver) held(ctx context.Context, inboxID string, through uint64) (recs []ports.IdentityUpdateRecord, highest uint64, err error) {
	err = r.opts.Store.Tx(ctx, func(tx ports.Tx) error {
		var err error
		if recs, err = tx.IdentityCache().List(ctx, inboxID, through); err != nil {
			return err
		}
		highest, err = tx.IdentityCache().Highest(ctx, inboxID)
		return err
	})
	return recs, highest, err
}

// AssociationState implements [ports.Identity]. It answers only when the
// store holds a valid update of the inbox at exactly sequenceID (the fold
// of every held update up to it, JOIN-051). When it does not, it fetches the
// inbox's updates after the highest one held, and keeps fetching every
// RetryInterval for RetryWindow; it answers ErrNotFound at once when the
// topic already shows a later update and none valid at sequenceID, since a
// topic never shows an id after a later one (JOIN-059).
func (r *Resolver) AssociationState(ctx context.Context, inboxID string, sequenceID uint64) (ports.AssociationState, error) {
	if _, err := Topic(inboxID); err != nil {
		return ports.AssociationState{}, fmt.Errorf("association state: %w: %v", ports.ErrNotFound, err)
	}
	if sequenceID == 0 || sequenceID > math.MaxInt64 {
		return ports.AssociationState{}, fmt.Errorf("association state of %s at %d: %w: no update has that sequence id", inboxID, sequenceID, ports.ErrNotFound)
	}
	deadline := r.opts.Clock.Now().Add(r.opts.RetryWindow)
	var fetchErr error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if fetchErr = r.Sync(ctx, inboxID); fetchErr != nil && ctx.Err() != nil {
				return ports.AssociationState{}, ctx.Err()
			}
		}
		recs, highest, err := r.held(ctx, inboxID, sequenceID)
		if err != nil {
			return ports.AssociationState{}, fmt.Errorf("association state of %s: %w", inboxID, err)
		}
		if validAt(inboxID, recs, sequenceID) {
			return Fold(inboxID, recs, sequenceID), nil
		}
		if highest >= sequenceID {
			return ports.AssociationState{}, fmt.Errorf("association state of %s at %d: %w: the topic holds no valid update at that sequence id",
				inboxID, sequenceID, ports.ErrNotFound)
		}
		if attempt == 0 {
			continue // fetch at once, without waiting
		}
		now := r.opts.Clock.Now()
		if !now.Before(deadline) {
			if fetchErr != nil {
				return ports.AssociationState{}, fmt.Errorf("association state of %s at %d: %w", inboxID, sequenceID, fetchErr)
			}
			return ports.AssociationState{}, fmt.Errorf("association state of %s at %d: %w: no update at that sequence id after fetching for %v",
				inboxID, sequenceID, ports.ErrNotFound, r.opts.RetryWindow)
		}
		select {
		case <-ctx.Done():
			return ports.AssociationState{}, ctx.Err()
		case <-r.opts.Clock.After(min(r.opts.RetryInterval, deadline.Sub(now))):
		}
	}
}

// Newest implements [ports.Identity]: the fold of every update held for the
// inbox, without fetching (JOIN-095). Its SequenceID is the highest held.
func (r *Resolver) Newest(ctx context.Context, inboxID string) (ports.AssociationState, error) {
	recs, highest, err := r.held(ctx, inboxID, math.MaxInt64)
	if err != nil {
		return ports.AssociationState{}, fmt.Errorf("newest association state of %s: %w", inboxID, err)
	}
	if len(recs) == 0 {
		return ports.AssociationState{}, fmt.Errorf("newest association state of %s: %w: no update held", inboxID, ports.ErrNotFound)
	}
	return Fold(inboxID, recs, highest), nil
}

// Sync fetches the inbox's identity updates after the highest one held and
// stores them, page by page, until the topic has no more. Only envelopes
// whose sequence ids increase past what is held are stored, so the held
// updates are always a prefix of the topic. A transport failure wraps
// [ports.ErrUnavailable] (or the transport's own class).
func (r *Resolver) Sync(ctx context.Context, inboxID string) error {
	topic, err := Topic(inboxID)
	if err != nil {
		return err
	}
	_, after, err := r.held(ctx, inboxID, 0)
	if err != nil {
		return err
	}
	for {
		page, err := r.opts.Transport.Query(ctx, topic, after, r.opts.PageSize)
		if err != nil {
			return fmt.Errorf("fetch identity updates of %s: %w", inboxID, err)
		}
		var recs []ports.IdentityUpdateRecord
		for _, env := range page {
			seq := env.GetSequenceId()
			if seq <= after || seq > math.MaxInt64 {
				break // a sequence id that does not move forward ends the page
			}
			recs = append(recs, ports.IdentityUpdateRecord{InboxID: inboxID, SequenceID: seq, Update: updateBytes(env)})
			after = seq
		}
		if len(recs) == 0 {
			return nil
		}
		err = r.opts.Store.Tx(ctx, func(tx ports.Tx) error {
			for _, rec := range recs {
				if _, err := tx.IdentityCache().Put(ctx, rec); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("store identity updates of %s: %w", inboxID, err)
		}
		if len(recs) < len(page) {
			return nil
		}
	}
}

// updateBytes returns the serialized IdentityUpdate an envelope carries,
// or one byte that decodes as no update, so that the envelope still
// advances the held prefix and is ignored by Fold.
func updateBytes(env *backendpb.OriginatorEnvelope) []byte {
	if u := env.GetEnvelope().GetIdentityUpdate(); u != nil {
		if b, err := proto.Marshal(u); err == nil && len(b) > 0 {
			return b
		}
	}
	return []byte{0xff}
}
