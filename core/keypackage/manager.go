package keypackage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/apipb"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// Blob namespace and keys of the manager's own state (COMP-128).
const (
	// BlobNamespace is the [ports.Blobs] namespace of the manager's state.
	BlobNamespace = "regroup/keypackage"

	blobRotate  = "rotate"
	blobSettled = "settled/"
)

// ErrNotAssociated reports an installation its inbox's identity state does
// not associate; it publishes no key package (JOIN-001).
var ErrNotAssociated = errors.New("installation is not associated with its inbox")

// ManagerOptions configure a [Manager]. Every field without a stated
// default is required.
type ManagerOptions struct {
	Store     ports.Store
	Transport ports.Transport
	Engine    Engine
	Wrappers  Wrappers
	Clock     ports.Clock
	// Identity resolves the own inbox (JOIN-001). When it also has a
	// Sync(ctx, inboxID) error method (as [identity.Resolver] does), the
	// manager syncs the inbox before it reads the newest state.
	Identity     ports.Identity
	Installation identity.Installation
	// WrapperAlgorithm of new packages; default X-Wing (COMP-127).
	WrapperAlgorithm ports.WrapperAlgorithmID
	// Lifetime of new packages; default [DefaultLifetime].
	Lifetime time.Duration
	// RotateBefore is how long before not_after the current package is
	// replaced; default 2 weeks.
	RotateBefore time.Duration
	// DestroyDelay is how long superseded keys are kept after the delay
	// starts (JOIN-074); default 24 hours.
	DestroyDelay time.Duration
	// TickInterval is how often [Manager.Run] ticks; default 1 minute.
	TickInterval time.Duration
}

// Manager keeps this installation's key packages. It is safe for
// concurrent use only in the sense that every state change is one store
// transaction; run one manager per installation.
type Manager struct {
	o ManagerOptions
	// checkedAt is when the manager last read what its topic serves
	// (served.go).
	checkMu   sync.Mutex
	checkedAt time.Time
}

// NewManager returns a manager, or an error naming a missing option.
func NewManager(o ManagerOptions) (*Manager, error) {
	if o.Store == nil || o.Transport == nil || o.Engine == nil || o.Wrappers == nil || o.Clock == nil || o.Identity == nil {
		return nil, errors.New("key-package manager needs a store, transport, engine, wrappers, clock and identity")
	}
	if o.Installation.InboxID == "" || o.Installation.InstallationKey == nil {
		return nil, errors.New("key-package manager needs the installation's inbox and key")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.Lifetime, DefaultLifetime)
	def(&o.RotateBefore, 14*24*time.Hour)
	def(&o.DestroyDelay, 24*time.Hour)
	def(&o.TickInterval, time.Minute)
	return &Manager{o: o}, nil
}

// snapshot is the manager's stored state read in one transaction.
type snapshot struct {
	recs    []ports.KeyPackageRecord
	current int // index of the newest confirmed package, -1 when none
	settled map[string]time.Time
	rotate  bool
}

func (m *Manager) read(ctx context.Context, tx ports.Tx) (snapshot, error) {
	recs, err := tx.KeyPackages().List(ctx)
	if err != nil {
		return snapshot{}, err
	}
	s := snapshot{recs: recs, current: -1, settled: map[string]time.Time{}}
	for i, r := range recs {
		if r.PublishSequenceID > 0 && !r.PublishRefused && (s.current < 0 || r.PublishSequenceID > recs[s.current].PublishSequenceID) {
			s.current = i
		}
	}
	keys, err := tx.Blobs().Keys(ctx, BlobNamespace, "")
	if err != nil {
		return snapshot{}, err
	}
	for _, k := range keys {
		switch {
		case k == blobRotate:
			s.rotate = true
		case len(k) > len(blobSettled) && k[:len(blobSettled)] == blobSettled:
			v, err := tx.Blobs().Get(ctx, BlobNamespace, k)
			if err != nil {
				return snapshot{}, err
			}
			if len(v) == 8 {
				s.settled[k[len(blobSettled):]] = time.Unix(0, int64(binary.BigEndian.Uint64(v)))
			}
		}
	}
	return s, nil
}

func (m *Manager) snapshot(ctx context.Context) (s snapshot, err error) {
	err = m.o.Store.Tx(ctx, func(tx ports.Tx) error {
		s, err = m.read(ctx, tx)
		return err
	})
	return s, err
}

// pending returns the newest package created after the current one whose
// publish has not been confirmed or refused: the one to (re)publish.
func (s snapshot) pending() (ports.KeyPackageRecord, bool) {
	for i := len(s.recs) - 1; i > s.current; i-- {
		r := s.recs[i]
		if r.PublishSequenceID == 0 && !r.PublishRefused && r.DestroyedAt.IsZero() {
			return r, true
		}
	}
	return ports.KeyPackageRecord{}, false
}

// Current returns the newest package whose publish was confirmed, or an
// error wrapping [ports.ErrNotFound] when none was.
func (m *Manager) Current(ctx context.Context) (ports.KeyPackageRecord, error) {
	s, err := m.snapshot(ctx)
	if err != nil {
		return ports.KeyPackageRecord{}, err
	}
	if s.current < 0 {
		return ports.KeyPackageRecord{}, fmt.Errorf("current key package: %w: none published", ports.ErrNotFound)
	}
	return s.recs[s.current], nil
}

// Publish makes sure a package is published: it republishes a package
// whose publish outcome is unknown, or publishes a first one, and returns
// the current package. It does nothing when a package is current and
// nothing is pending.
func (m *Manager) Publish(ctx context.Context) (ports.KeyPackageRecord, error) {
	s, err := m.snapshot(ctx)
	if err != nil {
		return ports.KeyPackageRecord{}, err
	}
	if p, ok := s.pending(); ok {
		return m.publish(ctx, p)
	}
	if s.current >= 0 {
		return s.recs[s.current], nil
	}
	return m.Rotate(ctx)
}

// Rotate builds a replacement with fresh init, encryption and wrapper keys
// (JOIN-016), stores it with its private keys, then publishes it. The
// stored package is republished by [Manager.Publish] or [Manager.Tick]
// when the publish fails other than by refusal.
func (m *Manager) Rotate(ctx context.Context) (ports.KeyPackageRecord, error) {
	if err := m.checkAssociated(ctx); err != nil {
		return ports.KeyPackageRecord{}, err
	}
	s, err := m.snapshot(ctx)
	if err != nil {
		return ports.KeyPackageRecord{}, err
	}
	now := m.o.Clock.Now()
	if n := len(s.recs); n > 0 && !now.After(s.recs[n-1].CreatedAt) {
		now = s.recs[n-1].CreatedAt.Add(time.Nanosecond) // creation order is list order
	}
	rec, err := Build(ctx, BuildOptions{
		Engine: m.o.Engine, Wrappers: m.o.Wrappers, WrapperAlgorithm: m.o.WrapperAlgorithm,
		InboxID: m.o.Installation.InboxID, InstallationKey: m.o.Installation.InstallationKey,
		Now: now, Lifetime: m.o.Lifetime,
	})
	if err != nil {
		return ports.KeyPackageRecord{}, err
	}
	// The private keys are stored before the package can be served.
	if err := m.o.Store.Tx(ctx, func(tx ports.Tx) error { return tx.KeyPackages().Insert(ctx, rec) }); err != nil {
		return ports.KeyPackageRecord{}, fmt.Errorf("store key package: %w", err)
	}
	return m.send(ctx, rec) // checked above, before the package was built
}

// checkAssociated applies JOIN-001: the newest identity state of the own
// inbox must associate the installation key.
func (m *Manager) checkAssociated(ctx context.Context) error {
	inbox := m.o.Installation.InboxID
	if s, ok := m.o.Identity.(interface {
		Sync(context.Context, string) error
	}); ok {
		if err := s.Sync(ctx, inbox); err != nil {
			return fmt.Errorf("key package: sync own inbox: %w", err)
		}
	}
	st, err := m.o.Identity.Newest(ctx, inbox)
	if err != nil && !errors.Is(err, ports.ErrNotFound) {
		return fmt.Errorf("key package: own inbox: %w", err)
	}
	for _, k := range st.InstallationKeys {
		if bytes.Equal(k, m.o.Installation.PublicKey()) {
			return nil
		}
	}
	return fmt.Errorf("key package for %x: %w %s", []byte(m.o.Installation.PublicKey()), ErrNotAssociated, inbox)
}

func (m *Manager) topic() []byte {
	return append([]byte{byte(ports.TopicKeyPackages)}, m.o.Installation.PublicKey()...)
}

// publish (re)publishes a stored package after the JOIN-001 check: an
// installation revoked since the package was built publishes nothing, and
// the package stays pending.
func (m *Manager) publish(ctx context.Context, rec ports.KeyPackageRecord) (ports.KeyPackageRecord, error) {
	if err := m.checkAssociated(ctx); err != nil {
		return rec, err
	}
	return m.send(ctx, rec)
}

// send sends rec and records the outcome: the sequence id of a
// confirmed publish, or the refusal of one the service refused with
// INVALID_ARGUMENT (JOIN-020). Any other failure leaves rec pending.
func (m *Manager) send(ctx context.Context, rec ports.KeyPackageRecord) (ports.KeyPackageRecord, error) {
	ids, err := m.o.Transport.Publish(ctx, []*backendpb.ClientEnvelope{{
		TargetTopic: m.topic(),
		Payload:     &backendpb.ClientEnvelope_KeyPackage{KeyPackage: &apipb.KeyPackage{KeyPackageTlsSerialized: rec.KeyPackage}},
	}})
	refused := errors.Is(err, ports.ErrInvalidArgument)
	if err != nil && !refused {
		return rec, fmt.Errorf("publish key package: %w", err)
	}
	if err == nil && (len(ids) != 1 || ids[0] == 0) {
		return rec, fmt.Errorf("publish key package: %w: response carries no sequence id", ports.ErrUnavailable)
	}
	now := m.o.Clock.Now()
	uerr := m.o.Store.Tx(ctx, func(tx ports.Tx) error {
		if err := tx.KeyPackages().Update(ctx, rec.Ref, func(r *ports.KeyPackageRecord) error {
			if refused {
				r.PublishRefused = true
			} else {
				r.PublishSequenceID, r.PublishConfirmedAt = ids[0], now
			}
			rec = *r
			return nil
		}); err != nil {
			return err
		}
		if refused {
			return nil
		}
		return tx.Blobs().Delete(ctx, BlobNamespace, blobRotate)
	})
	if uerr != nil {
		return rec, fmt.Errorf("record key package publish: %w", uerr)
	}
	if refused {
		return rec, fmt.Errorf("publish key package: %w", err)
	}
	return rec, nil
}

// WelcomeAccepted records that a Welcome addressed to the package ref was
// accepted; when ref is the current package, the next tick rotates it.
func (m *Manager) WelcomeAccepted(ctx context.Context, ref []byte) error {
	return m.o.Store.Tx(ctx, func(tx ports.Tx) error {
		s, err := m.read(ctx, tx)
		if err != nil || s.current < 0 || !bytes.Equal(s.recs[s.current].Ref, ref) {
			return err
		}
		return tx.Blobs().Put(ctx, BlobNamespace, blobRotate, []byte{1})
	})
}

// Tick does the manager's periodic work: it republishes a package whose
// publish outcome is unknown, publishes a first package, rotates before
// not_after, after a Welcome to the current package was accepted, or when
// the delivery service no longer serves it (COMP-463), runs
// the settlement read for packages whose publish response was lost, and
// destroys what is due. A failing publish does not stop destruction; the
// errors are joined.
func (m *Manager) Tick(ctx context.Context) error {
	s, err := m.snapshot(ctx)
	if err != nil {
		return err
	}
	var errs []error
	now := m.o.Clock.Now()
	if p, ok := s.pending(); ok {
		_, err = m.publish(ctx, p)
	} else if s.current < 0 || s.rotate || !now.Before(s.recs[s.current].NotAfter.Add(-m.o.RotateBefore)) {
		_, err = m.Rotate(ctx)
	} else if gone, uerr := m.unserved(ctx, s); uerr != nil {
		err = uerr
	} else if gone { // COMP-463
		_, err = m.Rotate(ctx)
	}
	errs = append(errs, err, m.settle(ctx))
	_, err = m.DestroySuperseded(ctx)
	return errors.Join(append(errs, err)...)
}

// Run calls Tick at once and then every TickInterval of the clock until
// ctx ends; onError, when not nil, receives each tick's error.
func (m *Manager) Run(ctx context.Context, onError func(error)) error {
	for {
		if err := m.Tick(ctx); err != nil && onError != nil && ctx.Err() == nil {
			onError(err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-m.o.Clock.After(m.o.TickInterval):
		}
	}
}
