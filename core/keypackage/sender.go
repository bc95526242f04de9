package keypackage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// ErrNoUsableInstallation reports an inbox none of whose installations has
// a usable key package; the inbox cannot be added.
var ErrNoUsableInstallation = errors.New("no installation of the inbox has a usable key package")

// Failure is one installation a sender could not address, with why.
type Failure struct {
	InstallationKey []byte
	Err             error
}

// InboxPackages is what a sender learns about one inbox: the installations
// it adds (JOIN-093) and the ones it records in failed_installations
// (JOIN-012).
type InboxPackages struct {
	// State is the association state the installations were taken from.
	State ports.AssociationState
	// Usable are the installations whose newest package passed, in the
	// state's order.
	Usable []Validated
	// Failed are the installations left out, in the state's order.
	Failed []Failure
}

// FailedInstallations returns the installation keys a sender records in
// the inbox's failed_installations (JOIN-012).
func (p InboxPackages) FailedInstallations() [][]byte {
	out := make([][]byte, len(p.Failed))
	for i, f := range p.Failed {
		out[i] = bytes.Clone(f.InstallationKey)
	}
	return out
}

// MembershipEntry returns the inbox's GROUP_MEMBERSHIP entry (COMP-020):
// the identity sequence id the installations were resolved at and the
// installations left out (JOIN-012).
func (p InboxPackages) MembershipEntry() *contentspb.GroupMembershipEntry {
	return &contentspb.GroupMembershipEntry{Version: &contentspb.GroupMembershipEntry_V1_{V1: &contentspb.GroupMembershipEntry_V1{
		SequenceId: p.State.SequenceID, FailedInstallations: p.FailedInstallations(),
	}}}
}

// FetchInbox fetches the newest key package of every installation state
// associates and validates each at time now. An installation without a
// package, or whose package fails [Validator.Validate], is reported in
// Failed and does not fail the inbox (JOIN-093); it fails with
// [ErrNoUsableInstallation] only when no installation is usable. A
// transport failure other than "no package" fails the whole fetch, so a
// network error never drops an installation silently.
func (v *Validator) FetchInbox(ctx context.Context, tr ports.Transport, state ports.AssociationState, now time.Time) (InboxPackages, error) {
	out := InboxPackages{State: state}
	for _, key := range state.InstallationKeys {
		val, err := v.fetchOne(ctx, tr, state.InboxID, key, now)
		switch {
		case err == nil:
			out.Usable = append(out.Usable, val)
		case errors.Is(err, ErrRejected) || errors.Is(err, ports.ErrNotFound):
			out.Failed = append(out.Failed, Failure{InstallationKey: bytes.Clone(key), Err: err})
		default:
			return InboxPackages{}, fmt.Errorf("fetch key packages of %s: %w", state.InboxID, err)
		}
	}
	if len(out.Usable) == 0 {
		return out, fmt.Errorf("inbox %s (%d installations): %w", state.InboxID, len(state.InstallationKeys), ErrNoUsableInstallation)
	}
	return out, nil
}

func (v *Validator) fetchOne(ctx context.Context, tr ports.Transport, inboxID string, key []byte, now time.Time) (Validated, error) {
	topic := append([]byte{byte(ports.TopicKeyPackages)}, key...)
	env, err := tr.QueryNewest(ctx, topic)
	if err != nil {
		return Validated{}, fmt.Errorf("newest key package of %x: %w", key, err)
	}
	if !bytes.Equal(env.GetEnvelope().GetTargetTopic(), topic) {
		return Validated{}, reject(ErrUnverifiable, "the newest envelope served for %x is for another topic", key)
	}
	kp := env.GetEnvelope().GetKeyPackage().GetKeyPackageTlsSerialized()
	if len(kp) == 0 {
		return Validated{}, reject(ErrUnverifiable, "the newest envelope served for %x carries no key package", key)
	}
	val, err := v.Validate(ctx, kp, inboxID, key, now)
	if err != nil {
		return Validated{}, err
	}
	val.SequenceID = env.GetSequenceId()
	return val, nil
}
