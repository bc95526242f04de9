// Package metadata decodes and encodes the group metadata regroup carries
// in the group context: the app_data_dictionary extension (0x0006) of
// draft-ietf-mls-extensions and the components the companion definitions
// place in it.
//
// # Encoding
//
// The extension data is a TLS-serialized AppDataDictionary: a vector
// (RFC 9420 §2.1.2 variable-length prefix) of ComponentData, each a uint16
// component id followed by an opaque vector. Components are sorted by id and
// each id appears at most once; [Parse] rejects anything else.
//
// Component payloads: the super admin list (0x8001), the admin list
// (0x8002) and the viewer list (0x8011) are protobuf InboxList messages;
// the role policy version (0x8010) is a big-endian uint16; DM_MEMBERS (0xBFFD) is a
// protobuf DmMembers; the conversation type (0xBFFF) is one byte holding
// the ports.ConversationType value; GROUP_ROOT_KEY (0xBFFB) is the 32 raw
// bytes of the group root.
//
// # Errors
//
// Malformed input wraps [ErrMalformed]; a component or extension that is
// absent wraps [ErrMissing].
package metadata

import (
	"errors"
	"fmt"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// Extension and component ids (companion definitions).
const (
	ExtensionAppDataDictionary uint16 = 0x0006

	ComponentSuperAdminList   uint16 = 0x8001
	ComponentAdminList        uint16 = 0x8002
	ComponentGroupMembership  uint16 = 0x8003
	ComponentName             uint16 = 0x8004
	ComponentMinProtocol      uint16 = 0x800A
	ComponentPolicyVersion    uint16 = 0x8010
	ComponentViewerList       uint16 = 0x8011
	ComponentConversationType uint16 = 0xBFFF
	ComponentCreatorInbox     uint16 = 0xBFFE
	ComponentDMMembers        uint16 = 0xBFFD
	ComponentOneshotMessage   uint16 = 0xBFFC
	ComponentGroupRootKey     uint16 = 0xBFFB
)

var (
	// ErrMalformed reports bytes that are not a valid encoding.
	ErrMalformed = errors.New("malformed group metadata")
	// ErrMissing reports an absent extension or component.
	ErrMissing = errors.New("group metadata component missing")
)

// Component is one ComponentData entry.
type Component struct {
	ID   uint16
	Data []byte
}

// Dictionary is a decoded AppDataDictionary: components in ascending id
// order, at most one per id.
type Dictionary struct {
	Components []Component
}

// Get returns the data of component id; ok is false when it is absent.
func (d Dictionary) Get(id uint16) (data []byte, ok bool) {
	i := sort.Search(len(d.Components), func(i int) bool { return d.Components[i].ID >= id })
	if i < len(d.Components) && d.Components[i].ID == id {
		return d.Components[i].Data, true
	}
	return nil, false
}

// Set returns a copy of d with component id set to data, keeping the order.
func (d Dictionary) Set(id uint16, data []byte) Dictionary {
	out := Dictionary{Components: make([]Component, 0, len(d.Components)+1)}
	done := false
	for _, c := range d.Components {
		if !done && c.ID >= id {
			out.Components = append(out.Components, Component{ID: id, Data: append([]byte(nil), data...)})
			done = true
			if c.ID == id {
				continue
			}
		}
		out.Components = append(out.Components, c)
	}
	if !done {
		out.Components = append(out.Components, Component{ID: id, Data: append([]byte(nil), data...)})
	}
	return out
}

// Parse decodes extension data as an AppDataDictionary. It fails, wrapping
// [ErrMalformed], on a truncated or non-minimal length, trailing bytes,
// or components out of order or repeated.
func Parse(data []byte) (Dictionary, error) {
	body, rest, err := readVector(data)
	if err != nil {
		return Dictionary{}, fmt.Errorf("app_data_dictionary: %w", err)
	}
	if len(rest) != 0 {
		return Dictionary{}, fmt.Errorf("app_data_dictionary: %d trailing bytes: %w", len(rest), ErrMalformed)
	}
	var d Dictionary
	for len(body) > 0 {
		if len(body) < 2 {
			return Dictionary{}, fmt.Errorf("component id truncated: %w", ErrMalformed)
		}
		id := uint16(body[0])<<8 | uint16(body[1])
		compData, next, err := readVector(body[2:])
		if err != nil {
			return Dictionary{}, fmt.Errorf("component 0x%04x: %w", id, err)
		}
		if n := len(d.Components); n > 0 && d.Components[n-1].ID >= id {
			return Dictionary{}, fmt.Errorf("component 0x%04x after 0x%04x: %w", id, d.Components[n-1].ID, ErrMalformed)
		}
		d.Components = append(d.Components, Component{ID: id, Data: compData})
		body = next
	}
	return d, nil
}

// Encode serializes d as an AppDataDictionary. Components must be sorted
// and unique; otherwise Encode returns an error wrapping [ErrMalformed].
func Encode(d Dictionary) ([]byte, error) {
	var body []byte
	for i, c := range d.Components {
		if i > 0 && d.Components[i-1].ID >= c.ID {
			return nil, fmt.Errorf("component 0x%04x out of order: %w", c.ID, ErrMalformed)
		}
		body = append(body, byte(c.ID>>8), byte(c.ID))
		var err error
		if body, err = appendVector(body, c.Data); err != nil {
			return nil, err
		}
	}
	return appendVector(nil, body)
}

// FromExtensions finds the app_data_dictionary among group context
// extensions and parses it. An absent extension wraps [ErrMissing]; two
// of them wrap [ErrMalformed].
func FromExtensions(exts []ports.Extension) (Dictionary, error) {
	var found *ports.Extension
	for i := range exts {
		if exts[i].Type == ExtensionAppDataDictionary {
			if found != nil {
				return Dictionary{}, fmt.Errorf("two app_data_dictionary extensions: %w", ErrMalformed)
			}
			found = &exts[i]
		}
	}
	if found == nil {
		return Dictionary{}, fmt.Errorf("app_data_dictionary extension: %w", ErrMissing)
	}
	return Parse(found.Data)
}

// Extension returns d encoded as a group context extension.
func (d Dictionary) Extension() (ports.Extension, error) {
	data, err := Encode(d)
	if err != nil {
		return ports.Extension{}, err
	}
	return ports.Extension{Type: ExtensionAppDataDictionary, Data: data}, nil
}

// Apply returns exts with its app_data_dictionary extension replaced by d,
// or d appended when there is none; the other extensions keep their
// places. It is how a commit changes a group's metadata.
func (d Dictionary) Apply(exts []ports.Extension) ([]ports.Extension, error) {
	e, err := d.Extension()
	if err != nil {
		return nil, err
	}
	out := make([]ports.Extension, 0, len(exts)+1)
	done := false
	for _, x := range exts {
		switch {
		case x.Type != e.Type:
			out = append(out, x)
		case !done:
			out, done = append(out, e), true
		}
	}
	if !done {
		out = append(out, e)
	}
	return out, nil
}

// ConversationType returns the 0xBFFF component.
func (d Dictionary) ConversationType() (ports.ConversationType, error) {
	data, ok := d.Get(ComponentConversationType)
	if !ok {
		return 0, fmt.Errorf("conversation type: %w", ErrMissing)
	}
	if len(data) != 1 || data[0] < 1 || data[0] > 4 {
		return 0, fmt.Errorf("conversation type %x: %w", data, ErrMalformed)
	}
	return ports.ConversationType(data[0]), nil
}

// EncodeConversationType returns the 0xBFFF component data for t.
func EncodeConversationType(t ports.ConversationType) []byte { return []byte{byte(t)} }

// SuperAdmins returns the inbox ids of the super admin list (0x8001).
func (d Dictionary) SuperAdmins() ([]string, error) {
	return d.inboxList(ComponentSuperAdminList, "super admin list")
}

// Admins returns the inbox ids of the admin list (0x8002).
func (d Dictionary) Admins() ([]string, error) {
	return d.inboxList(ComponentAdminList, "admin list")
}

func (d Dictionary) inboxList(id uint16, name string) ([]string, error) {
	data, ok := d.Get(id)
	if !ok {
		return nil, fmt.Errorf("%s: %w", name, ErrMissing)
	}
	var l contentspb.InboxList
	if err := proto.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("%s: %v: %w", name, err, ErrMalformed)
	}
	return l.GetInboxIds(), nil
}

// Viewers returns the inbox ids of the viewer list (0x8011), the members
// whose role is read-only (COMP-387).
func (d Dictionary) Viewers() ([]string, error) {
	return d.inboxList(ComponentViewerList, "viewer list")
}

// EncodeInboxList returns InboxList component data.
func EncodeInboxList(inboxes []string) []byte {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&contentspb.InboxList{InboxIds: inboxes})
	return b
}

// DMMembers returns the two inbox ids of DM_MEMBERS (0xBFFD).
func (d Dictionary) DMMembers() (one, two string, err error) {
	data, ok := d.Get(ComponentDMMembers)
	if !ok {
		return "", "", fmt.Errorf("DM_MEMBERS: %w", ErrMissing)
	}
	var m contentspb.DmMembers
	if err := proto.Unmarshal(data, &m); err != nil {
		return "", "", fmt.Errorf("DM_MEMBERS: %v: %w", err, ErrMalformed)
	}
	one, two = m.GetDmMemberOne().GetInboxId(), m.GetDmMemberTwo().GetInboxId()
	if one == "" || two == "" {
		return "", "", fmt.Errorf("DM_MEMBERS names an empty inbox: %w", ErrMalformed)
	}
	return one, two, nil
}

// EncodeDMMembers returns DM_MEMBERS component data.
func EncodeDMMembers(one, two string) []byte {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&contentspb.DmMembers{
		DmMemberOne: &contentspb.Inbox{InboxId: one},
		DmMemberTwo: &contentspb.Inbox{InboxId: two},
	})
	return b
}

// GroupRootKey returns the 32-byte GROUP_ROOT_KEY (0xBFFB).
func (d Dictionary) GroupRootKey() ([]byte, error) {
	data, ok := d.Get(ComponentGroupRootKey)
	if !ok {
		return nil, fmt.Errorf("GROUP_ROOT_KEY: %w", ErrMissing)
	}
	if len(data) != 32 {
		return nil, fmt.Errorf("GROUP_ROOT_KEY of %d bytes: %w", len(data), ErrMalformed)
	}
	return data, nil
}
