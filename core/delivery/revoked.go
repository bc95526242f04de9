package delivery

import (
	"bytes"
	"context"
	"fmt"

	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/identitypb"
)

// Device lists first (ADR-0030 amendment 2026-10-26, rule 1; COMP-509 to
// COMP-519). An inbox's device list is the fold of the identity updates
// this service stores on its topic; a member that knows a newer one —
// after a restore from a backup older than a revocation — publishes the
// updates it holds before its commits, as any identity publish (verified
// at admission, a copy answered with the stored id). Every commit the
// service checks against a group's public state, in catch-up or not, is
// then refused when the newest list the service holds revokes the
// installation that signed it (the commit's sender leaf: a member's,
// or a resync's or recovery join's joiner) or the installation whose
// connection published it, when that one has a leaf in the group. A
// revoke is signed by the inbox's recovery key alone, so whether a list
// revokes a key does not depend on the order its updates arrived in.

// RefusedRevoked is the refusal reason of a commit signed or published by
// an installation its inbox's newest device list revokes.
const RefusedRevoked = "revoked"

// revokedIn reports whether the identity updates this service stores for
// inbox hold a valid revoke of key. A store failure wraps
// [ports.ErrUnavailable].
func (s *Service) revokedIn(ctx context.Context, inbox string, key []byte) (bool, error) {
	revoked := false
	_, err := s.identityUpdates(ctx, inbox, func(_ uint64, u *identitypb.IdentityUpdate) {
		if !revoked && bytes.Equal(u.GetRevokeInstallation().GetInstallationKey(), key) {
			revoked = identity.VerifyUpdate(u) == nil
		}
	})
	return revoked, err
}

// refuseRevoked refuses envelope i, a commit to t's group that public
// validation accepted, when the newest device list this service holds
// revokes the commit's sender installation, or the publishing
// connection's installation when its key has a leaf in before. The
// refusal wraps [ports.ErrInvalidArgument]: the commit is refused for
// what it is, not for the group's state, so a retry is refused again.
func (s *Service) refuseRevoked(ctx context.Context, i int, topic []byte, t *groupTrack, before ports.GroupView, pc ports.PublicCommit) error {
	check := func(what, inbox string, key []byte) error {
		revoked, err := s.revokedIn(ctx, inbox, key)
		if err != nil {
			return because(RefusedUnavailable, fmt.Errorf("envelope %d: commit to group %x: %w", i, t.group, err))
		}
		if revoked {
			return &refusal{reason: RefusedRevoked, kind: KindName(topic),
				err: fmt.Errorf("envelope %d: %w: group %x: the commit's %s installation %x is revoked by inbox %s's newest device list",
					i, ports.ErrInvalidArgument, t.group, what, short(key), inbox)}
		}
		return nil
	}
	if err := check("sender", pc.Sender.InboxID, pc.Sender.SignatureKey); err != nil {
		return err
	}
	key := callerOf(ctx).InstallationKey
	if bytes.Equal(key, pc.Sender.SignatureKey) {
		return nil
	}
	if inbox, ok := leafInbox(before, key); ok {
		return check("uploader", inbox, key)
	}
	return nil
}
