// Package policy is the role policy of regroup's conversations: who may
// add, remove and readd installations and change which metadata, in a
// group and in a DM (COMP-180 to COMP-183), and what the GROUP_MEMBERSHIP
// component must say after a commit. Every member judges every commit it
// processes with [Check] on the states before and after it, so that all
// honest members accept or refuse the same commits (GMOD-021); the
// delivery service's commit acceptance (ADR-0030) runs the same code on
// public state.
//
// The functions are pure: they read group states ([ports.GroupView]) and
// the proposals a commit carries, and do no I/O.
package policy

import "errors"

// ErrNotPermitted is wrapped by every permission failure of a commit.
var ErrNotPermitted = errors.New("commit not permitted")

// ErrMessageNotPermitted is wrapped by [MaySend]'s refusals: an
// application message its sender's role does not let it send.
var ErrMessageNotPermitted = errors.New("message not permitted")
