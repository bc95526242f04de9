package keypackage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
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
// network error never drops an installation silently. The installations
// are fetched and validated as [Validator.FetchInboxes] does.
func (v *Validator) FetchInbox(ctx context.Context, tr ports.Transport, state ports.AssociationState, now time.Time) (InboxPackages, error) {
	out, errs := v.FetchInboxes(ctx, tr, []ports.AssociationState{state}, now)
	return out[0], errs[0]
}

// FetchInboxes is [Validator.FetchInbox] for many inboxes at once: every
// installation of every state is fetched and validated, Concurrency at a
// time (COMP-131), and each inbox gets the result and the error
// FetchInbox would have returned for it, in the order of states.
func (v *Validator) FetchInboxes(ctx context.Context, tr ports.Transport, states []ports.AssociationState, now time.Time) ([]InboxPackages, []error) {
	type job struct {
		inbox int
		key   []byte
		val   Validated
		err   error
	}
	var jobs []*job
	for i, st := range states {
		for _, key := range st.InstallationKeys {
			jobs = append(jobs, &job{inbox: i, key: key})
		}
	}
	each(len(jobs), v.concurrency(), func(i int) {
		j := jobs[i]
		j.val, j.err = v.fetchOne(ctx, tr, states[j.inbox].InboxID, j.key, now)
	})
	out, errs := make([]InboxPackages, len(states)), make([]error, len(states))
	for i, st := range states {
		out[i].State = st
	}
	for _, j := range jobs { // in state order: jobs were listed that way
		o := &out[j.inbox]
		switch {
		case errs[j.inbox] != nil:
		case j.err == nil:
			o.Usable = append(o.Usable, j.val)
		case errors.Is(j.err, ErrRejected) || errors.Is(j.err, ports.ErrNotFound):
			o.Failed = append(o.Failed, Failure{InstallationKey: bytes.Clone(j.key), Err: j.err})
		default:
			errs[j.inbox] = fmt.Errorf("fetch key packages of %s: %w", states[j.inbox].InboxID, j.err)
		}
	}
	for i, st := range states {
		switch {
		case errs[i] != nil:
			out[i] = InboxPackages{}
		case len(out[i].Usable) == 0:
			errs[i] = fmt.Errorf("inbox %s (%d installations): %w", st.InboxID, len(st.InstallationKeys), ErrNoUsableInstallation)
		}
	}
	return out, errs
}

func (v *Validator) concurrency() int {
	if v.Concurrency > 0 {
		return v.Concurrency
	}
	return 8
}

// each runs fn(0) … fn(n-1), workers at a time, and returns when all have
// returned.
func each(n, workers int, fn func(i int)) {
	workers = min(n, workers)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
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
