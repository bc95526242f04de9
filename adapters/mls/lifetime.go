package mls

import (
	"fmt"
	"time"

	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// DefaultLifetimeSkew is how far outside a key package's lifetime an Add
// is still accepted, by [PublicGroups] and by an [Engine] processing a
// commit alike (COMP-311, COMP-315).
const DefaultLifetimeSkew = time.Hour

// lifetimeSkew returns skew, or DefaultLifetimeSkew for 0.
func lifetimeSkew(skew time.Duration) time.Duration {
	if skew == 0 {
		return DefaultLifetimeSkew
	}
	return skew
}

// checkAddedLifetimes requires every key package a commit's resolved
// proposals add to be within its lifetime at now, widened by skew on both
// sides (RFC 9420 §7.3). The delivery service's validator and a member
// processing the commit apply this same rule, so that they agree on which
// commits are valid.
func checkAddedLifetimes(props []group.CommitProposal, now time.Time, skew time.Duration) error {
	for i, cp := range props {
		if pr := cp.Proposal; pr.Type == message.ProposalAdd && pr.Add != nil {
			if err := checkLifetime(pr.Add.KeyPackage.LeafNode.Lifetime, now, skew); err != nil {
				return fmt.Errorf("proposal %d: added leaf: %w", i, err)
			}
		}
	}
	return nil
}

// checkLifetime requires now within lt widened by skew on both sides.
func checkLifetime(lt message.Lifetime, now time.Time, skew time.Duration) error {
	if skew < 0 {
		skew = 0
	}
	t := now.Unix()
	s := int64(skew / time.Second)
	nb, na := int64(min(lt.NotBefore, 1<<62)), int64(min(lt.NotAfter, 1<<62))
	if t+s < nb || t-s > na {
		return fmt.Errorf("lifetime %d..%d does not hold time %d (skew %v)", lt.NotBefore, lt.NotAfter, t, skew)
	}
	return nil
}
