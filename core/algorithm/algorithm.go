// Package algorithm holds the registry through which core finds the Welcome
// wrapper algorithm and the pointee AEAD a message names. Core looks an
// algorithm up by the identifier on the wire, so a new algorithm is a
// registration, not a core change; a plugin-hosted algorithm registers the
// same way as a built-in one.
//
// # Errors
//
// A lookup of an identifier nobody registered returns an
// [*UnsupportedWrapperError] or [*UnsupportedAEADError]. Both unwrap to
// ports.ErrUnsupportedAlgorithm, so core holds the Welcome under JOIN-087
// instead of rejecting it. Registering a second implementation under an
// identifier already taken fails with [ErrAlreadyRegistered].
package algorithm

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/regroup-mls/regroup/ports"
)

// ErrAlreadyRegistered reports a registration under an identifier that
// another implementation already holds.
var ErrAlreadyRegistered = errors.New("algorithm already registered")

// UnsupportedWrapperError reports a wrapper_algorithm no registered
// implementation serves. It unwraps to ports.ErrUnsupportedAlgorithm.
type UnsupportedWrapperError struct {
	ID ports.WrapperAlgorithmID
}

func (e *UnsupportedWrapperError) Error() string {
	return fmt.Sprintf("unsupported welcome wrapper algorithm %v", e.ID)
}

// Unwrap returns ports.ErrUnsupportedAlgorithm.
func (e *UnsupportedWrapperError) Unwrap() error { return ports.ErrUnsupportedAlgorithm }

// UnsupportedAEADError reports an aead_type no registered implementation
// serves. It unwraps to ports.ErrUnsupportedAlgorithm.
type UnsupportedAEADError struct {
	ID ports.PointeeAEADID
}

func (e *UnsupportedAEADError) Error() string {
	return fmt.Sprintf("unsupported welcome pointee aead type %v", e.ID)
}

// Unwrap returns ports.ErrUnsupportedAlgorithm.
func (e *UnsupportedAEADError) Unwrap() error { return ports.ErrUnsupportedAlgorithm }

// Registry maps identifiers to implementations. The zero value is an empty
// registry ready for use; it is safe for concurrent use.
type Registry struct {
	mu       sync.RWMutex
	wrappers map[ports.WrapperAlgorithmID]ports.WrapperAlgorithm
	aeads    map[ports.PointeeAEADID]ports.PointeeAEAD
}

// New returns a registry holding impls, each a ports.WrapperAlgorithm or a
// ports.PointeeAEAD; see [Registry.Register].
func New(impls ...any) (*Registry, error) {
	r := &Registry{}
	if err := r.Register(impls...); err != nil {
		return nil, err
	}
	return r, nil
}

// Register adds each impl, which must be a ports.WrapperAlgorithm or a
// ports.PointeeAEAD, under its ID. It registers all or none: an impl of
// another type (ports.ErrInvalidInput), an unusable ID (ports.ErrInvalidInput)
// or an ID already taken ([ErrAlreadyRegistered]) leaves the registry
// unchanged.
func (r *Registry) Register(impls ...any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	ws := map[ports.WrapperAlgorithmID]ports.WrapperAlgorithm{}
	as := map[ports.PointeeAEADID]ports.PointeeAEAD{}
	for i, impl := range impls {
		switch v := impl.(type) {
		case ports.WrapperAlgorithm:
			id := v.ID()
			if id == ports.WrapperUnspecified || id == ports.WrapperSymmetricKey {
				return fmt.Errorf("register wrapper: %w: %v names no wrapper algorithm", ports.ErrInvalidInput, id)
			}
			if _, taken := r.wrappers[id]; taken || ws[id] != nil {
				return fmt.Errorf("register wrapper %v: %w", id, ErrAlreadyRegistered)
			}
			ws[id] = v
		case ports.PointeeAEAD:
			id := v.ID()
			if id == ports.PointeeAEADUnspecified {
				return fmt.Errorf("register pointee aead: %w: %v names no aead", ports.ErrInvalidInput, id)
			}
			if _, taken := r.aeads[id]; taken || as[id] != nil {
				return fmt.Errorf("register pointee aead %v: %w", id, ErrAlreadyRegistered)
			}
			as[id] = v
		default:
			return fmt.Errorf("register: %w: argument %d (%T) is neither a ports.WrapperAlgorithm nor a ports.PointeeAEAD", ports.ErrInvalidInput, i, impl)
		}
	}
	if r.wrappers == nil {
		r.wrappers = map[ports.WrapperAlgorithmID]ports.WrapperAlgorithm{}
		r.aeads = map[ports.PointeeAEADID]ports.PointeeAEAD{}
	}
	for id, w := range ws {
		r.wrappers[id] = w
	}
	for id, a := range as {
		r.aeads[id] = a
	}
	return nil
}

// Wrapper returns the wrapper algorithm registered under id, or an
// [*UnsupportedWrapperError] (JOIN-087).
func (r *Registry) Wrapper(id ports.WrapperAlgorithmID) (ports.WrapperAlgorithm, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if w, ok := r.wrappers[id]; ok {
		return w, nil
	}
	return nil, &UnsupportedWrapperError{ID: id}
}

// PointeeAEAD returns the pointee AEAD registered under id, or an
// [*UnsupportedAEADError] (JOIN-087).
func (r *Registry) PointeeAEAD(id ports.PointeeAEADID) (ports.PointeeAEAD, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if a, ok := r.aeads[id]; ok {
		return a, nil
	}
	return nil, &UnsupportedAEADError{ID: id}
}

// Wrappers lists the registered wrapper identifiers in ascending order.
func (r *Registry) Wrappers() []ports.WrapperAlgorithmID {
	r.mu.RLock()
	defer r.mu.RUnlock()
	ids := make([]ports.WrapperAlgorithmID, 0, len(r.wrappers))
	for id := range r.wrappers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// PointeeAEADs lists the registered pointee AEAD identifiers in ascending
// order.
func (r *Registry) PointeeAEADs() []ports.PointeeAEADID {
	r.mu.RLock()
	defer r.mu.RUnlock()
	ids := make([]ports.PointeeAEADID, 0, len(r.aeads))
	for id := range r.aeads {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
