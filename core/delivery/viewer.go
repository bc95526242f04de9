package delivery

import (
	"context"
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/core/internal/mlsframe"
	"github.com/regroup-mls/regroup/core/policy"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// RefusedViewerMessage is the refusal reason of an application message a
// viewer's installation publishes on a group topic (COMP-403).
const RefusedViewerMessage = "public_viewer_message"

// Viewers by connection (COMP-403). With commit acceptance on, the
// service enforces the viewer role (COMP-387, ADR-0030 Decision 7) by the
// publishing connection's authenticated installation: an application
// message on the topic of a registered group whose role policy lists
// viewers is refused when that installation is associated, in the
// identity updates the service stores, with a viewer inbox, and the
// message's kind is one [policy.MaySend] refuses a viewer. The kind is
// the message's authenticated_data (COMP-184), which a PrivateMessage
// carries in the clear. Commits are the role policy's (a viewer's commit
// updates its own leaf only, COMP-389); proposals and everything else
// pass here.

// admitViewerMessages applies COMP-403 to the batch; the group's roles are
// those of the public state stored before the batch.
func (s *Service) admitViewerMessages(ctx context.Context, caller ports.Caller, envs []*backendpb.ClientEnvelope) error {
	roles := map[string]*policy.Roles{} // nil: no state, or no viewers
	for i, env := range envs {
		topic := env.GetTargetTopic()
		if ports.TopicKind(topic[0]) != ports.TopicGroupMessages {
			continue
		}
		ct, aad, ok := mlsframe.PeekAuthenticatedData(env.GetGroupMessage())
		if !ok || ct != mlsframe.ContentApplication {
			continue
		}
		kind := appMessageKind(aad)
		if kind == ports.MessageLeaveRequest {
			// A leave request passes whoever sends it, a viewer's too
			// (ADR-0030 Decision 7); what the service does on one is the
			// leave handling's, not this rule's.
			continue
		}
		group := topic[1:]
		r, seen := roles[string(group)]
		if !seen {
			var err error
			if r, err = s.viewerRoles(ctx, group); err != nil {
				return because(RefusedUnavailable, fmt.Errorf("envelope %d: %w", i, err))
			}
			roles[string(group)] = r
		}
		if r == nil {
			continue
		}
		inbox, err := s.viewerOf(ctx, r, caller.InstallationKey)
		if err != nil {
			return because(RefusedUnavailable, fmt.Errorf("envelope %d: %w", i, err))
		}
		if inbox == "" {
			continue
		}
		if err := policy.MaySend(*r, inbox, kind); err != nil {
			return &refusal{reason: RefusedViewerMessage, kind: KindName(topic),
				err: fmt.Errorf("envelope %d: %w: group %x: the connection's installation is of a viewer: %w", i, ports.ErrInvalidArgument, group, err)}
		}
	}
	return nil
}

// appMessageKind is the kind an application message's authenticated_data
// names (COMP-184); 0 when it names none.
func appMessageKind(aad []byte) ports.MessageKind {
	if len(aad) != 1 {
		return 0
	}
	return ports.MessageKind(aad[0])
}

// viewerRoles returns the roles of the group's stored public state when
// they list viewers; nil when the group has no state (it is not
// registered, COMP-373) or no viewers. A state this service cached is
// used up to viewerStateMaxAge after it was read or written (COMP-404).
func (s *Service) viewerRoles(ctx context.Context, group []byte) (*policy.Roles, error) {
	var st ports.StoredPublicState
	var err error
	if c, ok := s.states.(*cachingStates); ok {
		st, err = c.recent(ctx, group, viewerStateMaxAge)
	} else {
		st, err = s.states.PublicState(ctx, group)
	}
	switch {
	case errors.Is(err, ports.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("%w: public state of group %x: %w", ports.ErrUnavailable, group, err)
	}
	v, err := s.viewer.View(ctx, st.State)
	if err != nil {
		return nil, fmt.Errorf("%w: the stored public state of group %x does not load: %w", ports.ErrUnavailable, group, err)
	}
	r, err := policy.RolesOf(v)
	if err != nil || len(r.Viewers) == 0 {
		// A state whose metadata does not decode lists no viewer the
		// service could hold a sender to; its members judge the message.
		return nil, nil
	}
	return &r, nil
}

// viewerOf returns the viewer inbox of r that the installation key is
// associated with in the identity updates the service stores, "" when
// none is.
func (s *Service) viewerOf(ctx context.Context, r *policy.Roles, key []byte) (string, error) {
	associated := s.associated(ctx)
	for _, inbox := range r.Viewers {
		ok, err := associated(inbox, key)
		if err != nil {
			return "", err
		}
		if ok {
			return inbox, nil
		}
	}
	return "", nil
}
