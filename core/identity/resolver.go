package identity

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/regroup-mls/regroup/core/internal/readpos"
	"github.com/regroup-mls/regroup/ports"
)

// ResolverOptions configure a [Resolver]. Store, Transport and Clock are
// required; zero values select the defaults.
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
	// Concurrency is how many inboxes' topics [Resolver.AssociationStates]
	// reads at once; default 8 (COMP-130). The updates read are verified
	// in batches over all cores (COMP-580).
	Concurrency int
}

// Resolver implements [ports.Identity] and [ports.BatchIdentity]: it
// answers from the identity updates held in the store and fetches an
// inbox's missing updates from its topic. It is safe for concurrent use.
type Resolver struct {
	opts ResolverOptions
	// tails are the identity topics' read positions past junk (COMP-249).
	tails readpos.Tracker
}

var (
	_ ports.Identity       = (*Resolver)(nil)
	_ ports.BatchIdentity  = (*Resolver)(nil)
	_ ports.NewestIdentity = (*Resolver)(nil)
)

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
	if opts.Concurrency <= 0 {
		opts.Concurrency = 8
	}
	return &Resolver{opts: opts}, nil
}

// AssociationState implements [ports.Identity]. It answers only when the
// store holds a valid update of the inbox at exactly sequenceID (the fold
// of every held update up to it, JOIN-051). When it does not, it fetches the
// inbox's updates after the highest one held, and keeps fetching every
// RetryInterval for RetryWindow; it answers ErrNotFound at once when the
// topic already shows a later update and none valid at sequenceID, since a
// topic never shows an id after a later one (JOIN-059).
func (r *Resolver) AssociationState(ctx context.Context, inboxID string, sequenceID uint64) (ports.AssociationState, error) {
	res, err := r.AssociationStates(ctx, []ports.IdentityRequest{{InboxID: inboxID, SequenceID: sequenceID}})
	if err != nil {
		return ports.AssociationState{}, fmt.Errorf("association state of %s: %w", inboxID, err)
	}
	return res[0].State, res[0].Err
}

// Newest implements [ports.Identity]: the fold of every update held for the
// inbox, without fetching (JOIN-095). Its SequenceID is the highest held.
func (r *Resolver) Newest(ctx context.Context, inboxID string) (ports.AssociationState, error) {
	var recs []ports.IdentityUpdateRecord
	var highest uint64
	err := r.opts.Store.Tx(ctx, func(tx ports.Tx) error {
		var err error
		if recs, err = tx.IdentityCache().List(ctx, inboxID, math.MaxInt64); err != nil {
			return err
		}
		highest, err = tx.IdentityCache().Highest(ctx, inboxID)
		return err
	})
	if err != nil {
		return ports.AssociationState{}, fmt.Errorf("newest association state of %s: %w", inboxID, err)
	}
	if len(recs) == 0 {
		return ports.AssociationState{}, fmt.Errorf("newest association state of %s: %w: no update held", inboxID, ports.ErrNotFound)
	}
	return Fold(inboxID, recs, highest), nil
}

// NewestUpTo implements [ports.NewestIdentity]. The reported id is a
// delivery service's unauthenticated claim (API-244): it only bounds how
// far the topic is read, once, and never becomes the state's sequence id
// by itself, which is always the id of a verified update (COMP-274). So a
// newest id lied upward neither waits out the retry window for an update
// that does not exist nor fails the lookup, and one lied downward answers
// the state at the last verified update below it.
func (r *Resolver) NewestUpTo(ctx context.Context, inboxID string, reported uint64) (ports.AssociationState, error) {
	if _, err := Topic(inboxID); err != nil {
		return ports.AssociationState{}, err
	}
	reported = min(reported, math.MaxInt64)
	var after uint64
	err := r.opts.Store.Tx(ctx, func(tx ports.Tx) (err error) {
		after, err = tx.IdentityCache().Highest(ctx, inboxID)
		return err
	})
	if err != nil {
		return ports.AssociationState{}, fmt.Errorf("newest association state of %s: %w", inboxID, err)
	}
	if after < reported {
		recs, ferr := r.fetch(ctx, inboxID, after, reported)
		if len(recs) > 0 {
			if err := r.opts.Store.Tx(ctx, func(tx ports.Tx) error { return put(ctx, tx, recs) }); err != nil {
				return ports.AssociationState{}, fmt.Errorf("store identity updates of %s: %w", inboxID, err)
			}
		}
		if ferr != nil {
			return ports.AssociationState{}, fmt.Errorf("newest association state of %s: %w", inboxID, ferr)
		}
	}
	var recs []ports.IdentityUpdateRecord
	err = r.opts.Store.Tx(ctx, func(tx ports.Tx) (err error) {
		recs, err = tx.IdentityCache().List(ctx, inboxID, reported)
		return err
	})
	if err != nil {
		return ports.AssociationState{}, fmt.Errorf("newest association state of %s: %w", inboxID, err)
	}
	if len(recs) == 0 {
		return ports.AssociationState{}, fmt.Errorf("newest association state of %s: %w: no verified update at or below %d", inboxID, ports.ErrNotFound, reported)
	}
	return Fold(inboxID, recs, recs[len(recs)-1].SequenceID), nil
}

// Sync fetches the inbox's identity updates after the highest one held and
// stores them, until the topic has no more. Only verified updates of the
// inbox whose sequence ids increase past what is held are stored, so the
// held updates are the topic's updates up to the highest held, junk left
// out (COMP-249); pages fetched before a failure are kept. A
// transport failure wraps [ports.ErrUnavailable] (or the transport's own
// class).
func (r *Resolver) Sync(ctx context.Context, inboxID string) error {
	if _, err := Topic(inboxID); err != nil {
		return err
	}
	var after uint64
	err := r.opts.Store.Tx(ctx, func(tx ports.Tx) error {
		var err error
		after, err = tx.IdentityCache().Highest(ctx, inboxID)
		return err
	})
	if err != nil {
		return err
	}
	recs, fetchErr := r.fetch(ctx, inboxID, after, math.MaxUint64)
	if len(recs) > 0 {
		if err := r.opts.Store.Tx(ctx, func(tx ports.Tx) error { return put(ctx, tx, recs) }); err != nil {
			return fmt.Errorf("store identity updates of %s: %w", inboxID, err)
		}
	}
	return fetchErr
}

func put(ctx context.Context, tx ports.Tx, recs []ports.IdentityUpdateRecord) error {
	for _, rec := range recs {
		if _, err := tx.IdentityCache().Put(ctx, rec); err != nil {
			return err
		}
	}
	return nil
}
