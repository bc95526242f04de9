package delivery

import (
	"fmt"
	"slices"
	"testing"

	"github.com/regroup-mls/regroup/core/policy"
)

// COMP-381: a role policy error for a version this build does not know
// is refused as public_policy_version, apart from every other violation
// (public_policy), and the reason is among those metrics show at zero.
func TestCOMP381_UnknownPolicyVersionHasItsOwnReason(t *testing.T) {
	unknown := fmt.Errorf("after the commit: %w", &policy.UnknownVersionError{Version: 42})
	if got := policyReason(unknown); got != RefusedPolicyVersion {
		t.Fatalf("unknown version refused as %q, want %q", got, RefusedPolicyVersion)
	}
	if got := policyReason(fmt.Errorf("%w: a plain member renames", policy.ErrNotPermitted)); got != RefusedPolicy {
		t.Fatalf("a forbidden change refused as %q, want %q", got, RefusedPolicy)
	}
	if !slices.Contains(PublicRefusalReasons, RefusedPolicyVersion) {
		t.Fatal("public_policy_version is missing from PublicRefusalReasons")
	}
}
