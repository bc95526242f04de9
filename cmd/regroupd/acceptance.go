package main

import (
	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/ports"
)

// publicValidator returns the validator commit acceptance follows groups
// with: the built-in MLS engine's [mls.PublicGroups], which also reads
// stored states back ([ports.PublicStateViewer]), keeping decoded states
// of at most cacheBytes of encoding between calls (COMP-380).
func publicValidator(cacheBytes int) ports.PublicGroups {
	return mls.NewPublicGroups(&mls.PublicOptions{CacheBytes: cacheBytes})
}

// twoPhase returns the options of commit acceptance in two phases, nil
// when -two-phase is off. A grace period of 0 confirms on the first OK.
func twoPhase(cfg config) *delivery.TwoPhaseOptions {
	if !cfg.TwoPhase {
		return nil
	}
	grace := cfg.GracePeriod
	if grace == 0 {
		grace = -1
	}
	return &delivery.TwoPhaseOptions{GracePeriod: grace, Expiry: cfg.PendingExpiry, OwnerJoinLimit: cfg.OwnerJoinLimit}
}
