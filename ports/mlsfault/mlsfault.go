// Package mlsfault decorates a [ports.MLS] engine with faults that make
// one installation's view of a group diverge from the group's, so that
// tests and demos can fork a conversation on purpose and watch the commit
// log detect it and the recovery repair it. The forks are real: the
// wrapped engine builds, merges and reports exactly what it would for a
// member that went wrong in that way.
//
// Wrap the engine, give the decorator to the client in its place, and arm
// a fault for one group:
//
//	eng := mlsfault.Wrap(inner)
//	eng.Arm(groupID, mlsfault.DivergeAfterMerge)
//
// An armed fault fires at the next operation it applies to and is then
// spent; [Engine.ArmRepeat] keeps it armed until [Engine.Disarm]. A
// transaction the caller rolls back and runs again meets the fault again
// at the same epoch, so a retried transaction forks the same way.
// [Engine.Fired] counts the epochs at which a fault fired. A decorator
// with nothing armed behaves exactly as the engine it wraps.
//
// # Faults
//
//   - [RefuseWinner] is the classic fork of a commit race: the next commit
//     of another member is refused as invalid, and this installation
//     merges a commit of its own for the same epoch instead — its pending
//     commit when it holds one (merged when it reads it back), otherwise
//     one the decorator builds and merges at once without publishing it.
//     Every other member applied the winner: the epoch secrets diverge.
//   - [DivergeAfterMerge] is a state corrupted after a merge: right after
//     the next commit merges, the installation merges a further commit
//     nobody else sees, and the merge reports that state. The epoch
//     secrets diverge.
//   - [MisrecordAuthenticator] reports, for the next merge, an epoch
//     authenticator other than the engine's. The MLS state stays the
//     group's while the commit log records a different one: the member's
//     log diverges before its epoch secrets do, the fork that the readd
//     of fork-recovery section 7 repairs.
//
// # Errors
//
// A refusal by RefuseWinner is a [*ports.ProcessError] wrapping
// [ports.ErrInvalid] and [ErrInjected]. Every other error comes from the
// wrapped engine. An optional interface the wrapped engine does not
// implement fails with an error wrapping [ports.ErrUnsupported].
package mlsfault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// ErrInjected is wrapped by every failure a fault injects.
var ErrInjected = errors.New("injected fault")

// Fault is one way of making a member diverge from its group.
type Fault int

const (
	// RefuseWinner refuses another member's commit and merges an own
	// commit of the same epoch in its place.
	RefuseWinner Fault = iota + 1
	// DivergeAfterMerge follows the next merge with a private commit.
	DivergeAfterMerge
	// MisrecordAuthenticator reports another epoch authenticator for the
	// next merge; the MLS state is unchanged.
	MisrecordAuthenticator
)

// String returns the fault's name.
func (f Fault) String() string {
	switch f {
	case RefuseWinner:
		return "refuse-winner"
	case DivergeAfterMerge:
		return "diverge-after-merge"
	case MisrecordAuthenticator:
		return "misrecord-authenticator"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

var (
	_ ports.MLS               = (*Engine)(nil)
	_ ports.MLSPendingCommits = (*Engine)(nil)
	_ ports.MLSWelcomes       = (*Engine)(nil)
	_ ports.MLSExternal       = (*Engine)(nil)
	_ ports.MLSProposals      = (*Engine)(nil)
	_ ports.MLSSelfRemove     = (*Engine)(nil)
)

// Engine is a [ports.MLS] that forwards every call to the engine it wraps
// and injects the faults armed on it. It is safe for concurrent use.
type Engine struct {
	inner ports.MLS

	mu    sync.Mutex
	armed map[armKey]*arm
	fired map[armKey]int
}

type armKey struct {
	group string
	fault Fault
}

// arm is one armed fault: spent once it fired at an epoch and the group
// moved past that epoch, unless it repeats.
type arm struct {
	repeat bool
	fired  bool
	at     uint64 // the epoch it fired at
}

// Wrap returns a decorator of inner with no fault armed.
func Wrap(inner ports.MLS) *Engine {
	return &Engine{inner: inner, armed: map[armKey]*arm{}, fired: map[armKey]int{}}
}

// Inner returns the wrapped engine.
func (e *Engine) Inner() ports.MLS { return e.inner }

// Arm arms f for the group; it fires once, at the next operation it
// applies to.
func (e *Engine) Arm(groupID []byte, f Fault) { e.set(groupID, f, false) }

// ArmRepeat arms f for the group at every operation it applies to, until
// Disarm.
func (e *Engine) ArmRepeat(groupID []byte, f Fault) { e.set(groupID, f, true) }

func (e *Engine) set(groupID []byte, f Fault, repeat bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.armed[armKey{string(groupID), f}] = &arm{repeat: repeat}
}

// Disarm disarms every fault of the group.
func (e *Engine) Disarm(groupID []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k := range e.armed {
		if k.group == string(groupID) {
			delete(e.armed, k)
		}
	}
}

// Fired returns how many epochs of the group f fired at.
func (e *Engine) Fired(groupID []byte, f Fault) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.fired[armKey{string(groupID), f}]
}

// fire reports whether f fires for an operation on the group at epoch. A
// fault that fired at an epoch fires again at that epoch, so a
// transaction rolled back and retried meets it again; once the group is
// past that epoch a fault armed once is spent.
func (e *Engine) fire(groupID []byte, f Fault, epoch uint64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := armKey{string(groupID), f}
	a := e.armed[k]
	switch {
	case a == nil:
		return false
	case a.fired && a.at == epoch:
		return true
	case a.fired && !a.repeat:
		delete(e.armed, k)
		return false
	}
	a.fired, a.at = true, epoch
	e.fired[k]++
	return true
}

// Process forwards to the wrapped engine. Under [RefuseWinner] it refuses
// a commit of another member and merges an own commit of that epoch
// instead.
func (e *Engine) Process(ctx context.Context, tx ports.Tx, groupID, message []byte) (ports.Processed, error) {
	p, err := e.inner.Process(ctx, tx, groupID, message)
	if err != nil || p.Kind != ports.ProcessedCommit || p.Own || !e.fire(groupID, RefuseWinner, p.Epoch) {
		return p, err
	}
	refused := &ports.ProcessError{MessageEpoch: p.Epoch, Authenticated: true, // the wrapped engine processed it
		Err: fmt.Errorf("%w: %w: refused the winning commit of epoch %d", ports.ErrInvalid, ErrInjected, p.Epoch)}
	if _, err := e.pending(ctx, tx, groupID); err == nil {
		return ports.Processed{}, refused // its own commit merges when it is read back
	} else if !errors.Is(err, ports.ErrNotFound) {
		return ports.Processed{}, err
	}
	if _, err := e.inner.Commit(ctx, tx, groupID, ports.CommitOptions{ForcePath: true}); err != nil {
		return ports.Processed{}, fmt.Errorf("mlsfault: own commit in place of the winner: %w", err)
	}
	if _, err := e.inner.MergePending(ctx, tx, groupID); err != nil {
		return ports.Processed{}, fmt.Errorf("mlsfault: own commit in place of the winner: %w", err)
	}
	return ports.Processed{}, refused
}

// MergeStaged forwards to the wrapped engine, then applies
// [DivergeAfterMerge] or [MisrecordAuthenticator].
func (e *Engine) MergeStaged(ctx context.Context, tx ports.Tx, groupID []byte) (ports.GroupView, error) {
	return e.merge(ctx, tx, groupID, e.inner.MergeStaged)
}

// MergePending forwards to the wrapped engine, then applies
// [DivergeAfterMerge] or [MisrecordAuthenticator].
func (e *Engine) MergePending(ctx context.Context, tx ports.Tx, groupID []byte) (ports.GroupView, error) {
	return e.merge(ctx, tx, groupID, e.inner.MergePending)
}

func (e *Engine) merge(ctx context.Context, tx ports.Tx, groupID []byte,
	merge func(context.Context, ports.Tx, []byte) (ports.GroupView, error)) (ports.GroupView, error) {
	v, err := merge(ctx, tx, groupID)
	if err != nil || !v.Active || v.Epoch == 0 {
		return v, err
	}
	from := v.Epoch - 1 // the epoch the merged commit was built in
	if e.fire(groupID, DivergeAfterMerge, from) {
		if _, err := e.inner.Commit(ctx, tx, groupID, ports.CommitOptions{ForcePath: true}); err != nil {
			return ports.GroupView{}, fmt.Errorf("mlsfault: private commit after the merge: %w", err)
		}
		if v, err = e.inner.MergePending(ctx, tx, groupID); err != nil {
			return ports.GroupView{}, fmt.Errorf("mlsfault: private commit after the merge: %w", err)
		}
	}
	if e.fire(groupID, MisrecordAuthenticator, from) {
		v.EpochAuthenticator = misrecorded(v.EpochAuthenticator)
	}
	return v, nil
}

// misrecorded returns a different authenticator of the same length.
func misrecorded(a []byte) []byte {
	out := bytes.Clone(a)
	if len(out) == 0 {
		return []byte{0xff}
	}
	for i := range out {
		out[i] ^= 0x5a
	}
	return out
}

func (e *Engine) pending(ctx context.Context, tx ports.Tx, groupID []byte) (ports.CommitOutput, error) {
	pc, ok := e.inner.(ports.MLSPendingCommits)
	if !ok {
		return ports.CommitOutput{}, fmt.Errorf("mlsfault: the engine does not hand back pending commits: %w", ports.ErrUnsupported)
	}
	return pc.PendingCommit(ctx, tx, groupID)
}

// CreateKeyPackage forwards to the wrapped engine.
func (e *Engine) CreateKeyPackage(ctx context.Context, opts ports.KeyPackageOptions) (ports.KeyPackageBundle, error) {
	return e.inner.CreateKeyPackage(ctx, opts)
}

// ValidateKeyPackage forwards to the wrapped engine.
func (e *Engine) ValidateKeyPackage(ctx context.Context, kp []byte, opts ports.ValidateOptions) (ports.ValidatedKeyPackage, error) {
	return e.inner.ValidateKeyPackage(ctx, kp, opts)
}

// CreateGroup forwards to the wrapped engine.
func (e *Engine) CreateGroup(ctx context.Context, tx ports.Tx, groupID []byte, signer ports.KeyPackageBundle, extensions []ports.Extension) (ports.GroupView, error) {
	return e.inner.CreateGroup(ctx, tx, groupID, signer, extensions)
}

// StageWelcome forwards to the wrapped engine.
func (e *Engine) StageWelcome(ctx context.Context, tx ports.Tx, welcome []byte, kp ports.KeyPackageRecord) (ports.StagedWelcome, error) {
	return e.inner.StageWelcome(ctx, tx, welcome, kp)
}

// InstallWelcome forwards to the wrapped engine.
func (e *Engine) InstallWelcome(ctx context.Context, tx ports.Tx, handle string) (ports.GroupView, error) {
	return e.inner.InstallWelcome(ctx, tx, handle)
}

// Group forwards to the wrapped engine.
func (e *Engine) Group(ctx context.Context, tx ports.Tx, groupID []byte) (ports.GroupView, error) {
	return e.inner.Group(ctx, tx, groupID)
}

// Commit forwards to the wrapped engine.
func (e *Engine) Commit(ctx context.Context, tx ports.Tx, groupID []byte, opts ports.CommitOptions) (ports.CommitOutput, error) {
	return e.inner.Commit(ctx, tx, groupID, opts)
}

// ClearPending forwards to the wrapped engine.
func (e *Engine) ClearPending(ctx context.Context, tx ports.Tx, groupID []byte) error {
	return e.inner.ClearPending(ctx, tx, groupID)
}

// Encrypt forwards to the wrapped engine.
func (e *Engine) Encrypt(ctx context.Context, tx ports.Tx, groupID, plaintext, authenticatedData []byte) ([]byte, error) {
	return e.inner.Encrypt(ctx, tx, groupID, plaintext, authenticatedData)
}

// Export forwards to the wrapped engine.
func (e *Engine) Export(ctx context.Context, tx ports.Tx, groupID []byte, label string, context []byte, length int) ([]byte, error) {
	return e.inner.Export(ctx, tx, groupID, label, context, length)
}

// PendingCommit forwards to the wrapped engine's [ports.MLSPendingCommits].
func (e *Engine) PendingCommit(ctx context.Context, tx ports.Tx, groupID []byte) (ports.CommitOutput, error) {
	return e.pending(ctx, tx, groupID)
}

// Propose forwards to the wrapped engine's [ports.MLSProposals].
func (e *Engine) Propose(ctx context.Context, tx ports.Tx, groupID []byte, opts ports.ProposalOptions) ([]byte, error) {
	p, ok := e.inner.(ports.MLSProposals)
	if !ok {
		return nil, fmt.Errorf("mlsfault: the engine does not send proposals: %w", ports.ErrUnsupported)
	}
	return p.Propose(ctx, tx, groupID, opts)
}

// ProposeSelfRemove forwards to the wrapped engine's [ports.MLSSelfRemove].
func (e *Engine) ProposeSelfRemove(ctx context.Context, tx ports.Tx, groupID []byte) ([]byte, error) {
	p, ok := e.inner.(ports.MLSSelfRemove)
	if !ok {
		return nil, fmt.Errorf("mlsfault: the engine does not propose SelfRemove: %w", ports.ErrUnsupported)
	}
	return p.ProposeSelfRemove(ctx, tx, groupID)
}

func (e *Engine) welcomes() (ports.MLSWelcomes, error) {
	w, ok := e.inner.(ports.MLSWelcomes)
	if !ok {
		return nil, fmt.Errorf("mlsfault: the engine does not manage staged welcomes: %w", ports.ErrUnsupported)
	}
	return w, nil
}

// InstallWelcomeWith forwards to the wrapped engine's [ports.MLSWelcomes].
func (e *Engine) InstallWelcomeWith(ctx context.Context, tx ports.Tx, handle string, opts ports.InstallOptions) (ports.GroupView, error) {
	w, err := e.welcomes()
	if err != nil {
		return ports.GroupView{}, err
	}
	return w.InstallWelcomeWith(ctx, tx, handle, opts)
}

// StagedWelcome forwards to the wrapped engine's [ports.MLSWelcomes].
func (e *Engine) StagedWelcome(ctx context.Context, tx ports.Tx, handle string) (ports.StagedWelcome, error) {
	w, err := e.welcomes()
	if err != nil {
		return ports.StagedWelcome{}, err
	}
	return w.StagedWelcome(ctx, tx, handle)
}

// StagedWelcomes forwards to the wrapped engine's [ports.MLSWelcomes].
func (e *Engine) StagedWelcomes(ctx context.Context, tx ports.Tx, groupID []byte) ([]ports.StagedWelcome, error) {
	w, err := e.welcomes()
	if err != nil {
		return nil, err
	}
	return w.StagedWelcomes(ctx, tx, groupID)
}

// DiscardWelcome forwards to the wrapped engine's [ports.MLSWelcomes].
func (e *Engine) DiscardWelcome(ctx context.Context, tx ports.Tx, handle string) error {
	w, err := e.welcomes()
	if err != nil {
		return err
	}
	return w.DiscardWelcome(ctx, tx, handle)
}

// ExpireWelcomes forwards to the wrapped engine's [ports.MLSWelcomes].
func (e *Engine) ExpireWelcomes(ctx context.Context, tx ports.Tx, stagedBefore time.Time) (int, error) {
	w, err := e.welcomes()
	if err != nil {
		return 0, err
	}
	return w.ExpireWelcomes(ctx, tx, stagedBefore)
}

func (e *Engine) external() (ports.MLSExternal, error) {
	x, ok := e.inner.(ports.MLSExternal)
	if !ok {
		return nil, fmt.Errorf("mlsfault: the engine does not join by external commit: %w", ports.ErrUnsupported)
	}
	return x, nil
}

// GroupInfo forwards to the wrapped engine's [ports.MLSExternal].
func (e *Engine) GroupInfo(ctx context.Context, tx ports.Tx, groupID []byte) ([]byte, error) {
	x, err := e.external()
	if err != nil {
		return nil, err
	}
	return x.GroupInfo(ctx, tx, groupID)
}

// JoinExternal forwards to the wrapped engine's [ports.MLSExternal].
func (e *Engine) JoinExternal(ctx context.Context, tx ports.Tx, groupInfo []byte, opts ports.ExternalJoinOptions) (ports.CommitOutput, error) {
	x, err := e.external()
	if err != nil {
		return ports.CommitOutput{}, err
	}
	return x.JoinExternal(ctx, tx, groupInfo, opts)
}
