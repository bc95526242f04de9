package delivery

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/core/policy"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/identitypb"
)

// associatedPage is the page of identity updates associated reads at a
// time.
const associatedPage = 256

// associated answers [policy.External]'s association question from the
// identity updates this service stores: it folds the inbox's whole topic
// as the clients do (core/identity.Fold, which verifies each update and
// ignores what does not verify or names another inbox) and reports
// whether the installation key is associated at its end. A store failure
// wraps [ports.ErrUnavailable], so the publish fails without a refusal.
func (s *Service) associated(ctx context.Context) policy.Associated {
	return func(inbox string, key []byte) (bool, error) {
		keys, err := s.installationsOf(ctx, inbox)
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(keys, func(k []byte) bool { return bytes.Equal(k, key) }), nil
	}
}

// installationsOf returns the installation keys the inbox's identity
// updates this service stores associate at their end, folded as
// [Service.associated] describes. A store failure wraps
// [ports.ErrUnavailable].
func (s *Service) installationsOf(ctx context.Context, inbox string) ([][]byte, error) {
	var recs []ports.IdentityUpdateRecord
	through, err := s.identityUpdates(ctx, inbox, func(seq uint64, u *identitypb.IdentityUpdate) {
		b, err := proto.Marshal(u)
		if err == nil {
			recs = append(recs, ports.IdentityUpdateRecord{InboxID: inbox, SequenceID: seq, Update: b})
		}
	})
	if err != nil {
		return nil, err
	}
	return identity.Fold(inbox, recs, through).InstallationKeys, nil
}

// identityUpdates calls fn with every identity update of the inbox this
// service stores, in ascending sequence id, as stored (admission
// verified each, COMP-071; a caller that relies on a signature checks it
// again, as [identity.Fold] does), and returns the highest sequence id
// read.
// An inbox id of another form has none. A store failure wraps
// [ports.ErrUnavailable].
func (s *Service) identityUpdates(ctx context.Context, inbox string, fn func(seq uint64, u *identitypb.IdentityUpdate)) (uint64, error) {
	topic, err := identity.Topic(inbox)
	if err != nil {
		return 0, nil // no inbox of that form has updates
	}
	var after uint64
	for {
		page, err := s.store.Range(ctx, topic, after, associatedPage, s.opts.MaxPageBytes)
		if err != nil {
			return 0, fmt.Errorf("%w: identity updates of %s: %w", ports.ErrUnavailable, inbox, err)
		}
		for _, e := range page {
			after = e.SequenceID
			var ce backendpb.ClientEnvelope
			if proto.Unmarshal(e.Envelope, &ce) != nil {
				continue
			}
			if u := ce.GetIdentityUpdate(); u != nil && u.GetInboxId() == inbox {
				fn(e.SequenceID, u)
			}
		}
		if len(page) == 0 {
			return after, nil
		}
	}
}
