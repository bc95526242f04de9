package commitlog

import (
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
)

// RoleView says which inboxes are publishers of a conversation in a given
// group state: for a DM the inboxes in DM_MEMBERS, for a group the inboxes
// in the super admin list.
type RoleView interface {
	// Publishers returns the publisher inbox ids of view. ct is the stored
	// conversation type, used when the group context does not carry one.
	Publishers(ct ports.ConversationType, view ports.GroupView) (map[string]bool, error)
}

// MetadataRoles reads publishers from the group context's
// app_data_dictionary (core/metadata).
type MetadataRoles struct{}

// Publishers implements [RoleView]. A group without a super admin list has
// no publishers; a DM without DM_MEMBERS is an error.
func (MetadataRoles) Publishers(ct ports.ConversationType, view ports.GroupView) (map[string]bool, error) {
	d, err := metadata.FromExtensions(view.Extensions)
	if errors.Is(err, metadata.ErrMissing) {
		d, err = metadata.Dictionary{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("publishers: %w", err)
	}
	if t, err := d.ConversationType(); err == nil {
		ct = t
	} else if !errors.Is(err, metadata.ErrMissing) {
		return nil, fmt.Errorf("publishers: %w", err)
	}
	out := map[string]bool{}
	switch ct {
	case ports.ConversationDM:
		one, two, err := d.DMMembers()
		if err != nil {
			return nil, fmt.Errorf("publishers of a DM: %w", err)
		}
		out[one], out[two] = true, true
	case ports.ConversationGroup:
		admins, err := d.SuperAdmins()
		if err != nil && !errors.Is(err, metadata.ErrMissing) {
			return nil, fmt.Errorf("publishers of a group: %w", err)
		}
		for _, a := range admins {
			out[a] = true
		}
	}
	return out, nil
}

// roleState is a group state seen through a [RoleView].
type roleState struct {
	view     ports.GroupView
	inboxes  map[string]bool
	ownInbox string
	ownKey   []byte
	keys     map[string]bool // signature keys of publisher leaves
}

func (l *Log) roles(ct ports.ConversationType, view ports.GroupView) (roleState, error) {
	in, err := l.opts.Roles.Publishers(ct, view)
	if err != nil {
		return roleState{}, err
	}
	rs := roleState{view: view, inboxes: in, keys: map[string]bool{}}
	for _, m := range view.Members {
		if in[m.InboxID] {
			rs.keys[string(m.SignatureKey)] = true
		}
	}
	if view.Active {
		for _, m := range view.Members {
			if m.LeafIndex == view.OwnLeaf {
				rs.ownInbox, rs.ownKey = m.InboxID, m.SignatureKey
			}
		}
	}
	return rs, nil
}

// rolesOrNone is roles, with no publisher when the metadata does not
// decode.
func (l *Log) rolesOrNone(ct ports.ConversationType, view ports.GroupView) roleState {
	rs, err := l.roles(ct, view)
	if err != nil {
		rs, _ = (&Log{opts: Options{Roles: noRoles{}}}).roles(ct, view)
	}
	return rs
}

type noRoles struct{}

// Publishers returns no publisher.
func (noRoles) Publishers(ports.ConversationType, ports.GroupView) (map[string]bool, error) {
	return map[string]bool{}, nil
}

// selfPublisher reports that this installation is an active member whose
// leaf names a publisher inbox.
func (r roleState) selfPublisher() bool {
	return r.ownKey != nil && r.inboxes[r.ownInbox]
}

// isPublisherKey reports that key is the signature_key of a leaf whose
// inbox is a publisher.
func (r roleState) isPublisherKey(key []byte) bool { return r.keys[string(key)] }

// publisherKeys returns the signature keys of every publisher leaf.
func (r roleState) publisherKeys() map[string]bool { return r.keys }
