package client

import (
	"context"
	"fmt"

	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/core/policy"
)

// SetPolicyVersion migrates the group to role policy version v
// (ADR-0030 Decision 8, COMP-480): one commit that states v in the
// policy version component (0x8010) and, for a version other than 1,
// raises the minimum protocol version as COMP-390 says. Super admins may
// (in a DM either member). A version this client does not know is
// refused before anything is published with a [*policy.UnknownVersionError]:
// a client cannot move a group to rules it does not have. Members and a
// delivery service that do not know v refuse the commit, so a group is
// migrated only once every member's client knows the new version.
func (cv *Conversation) SetPolicyVersion(ctx context.Context, v uint16) error {
	if !policy.Known(v) {
		return fmt.Errorf("set policy version: %w", &policy.UnknownVersionError{Version: v})
	}
	err := cv.updateMetadata(ctx, func(d metadata.Dictionary, r policy.Roles) (metadata.Dictionary, error) {
		if err := r.MayChange(metadata.ComponentPolicyVersion, cv.c.InboxID()); err != nil {
			return d, fmt.Errorf("%w: %v", ErrNotPermitted, err)
		}
		return d.Set(metadata.ComponentPolicyVersion, metadata.EncodePolicyVersion(v)), nil
	})
	if err != nil {
		return fmt.Errorf("set policy version %d: %w", v, err)
	}
	return nil
}
