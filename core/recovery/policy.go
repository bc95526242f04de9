package recovery

import (
	"bytes"
	"slices"
)

// Mode selects the conversations a client sends readd requests for
// (FORK-070).
type Mode int

const (
	// None sends no readd request. It is the default.
	None Mode = iota
	// Listed sends requests for the group ids in [Policy.Groups] only.
	Listed
	// All sends requests for every group and DM.
	All
)

// Policy is the recovery policy of fork-recovery section 8, set when a
// client is created. The zero value is what the specification requires
// when an app sets nothing: no requests, responses enabled (FORK-070).
type Policy struct {
	Mode Mode
	// Groups are the group ids requests are sent for under [Listed].
	Groups [][]byte
	// DisableResponses stops this client from publishing readd commits
	// (FORK-071), for example to stop a readd loop. Publishing and reading
	// the commit log are unaffected.
	DisableResponses bool
	// RepairDiverged lets a Welcome from a permitted readder replace the
	// state of a forked conversation this installation asked to be
	// readded to, although the state is active, which JOIN-042 alone
	// never allows. It repairs a member whose epoch secrets diverged,
	// which the readd of section 7 cannot (docs/companion-spec.md,
	// COMP-205). Off by default.
	RepairDiverged bool
}

// Selects reports whether the policy sends requests for the group.
func (p Policy) Selects(groupID []byte) bool {
	switch p.Mode {
	case All:
		return true
	case Listed:
		return slices.ContainsFunc(p.Groups, func(g []byte) bool { return bytes.Equal(g, groupID) })
	}
	return false
}
