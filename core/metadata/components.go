package metadata

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/proto/contentspb"
)

// Membership returns the GROUP_MEMBERSHIP component (0x8003): inbox id →
// entry (COMP-020). An entry whose version is not V1 is malformed.
func (d Dictionary) Membership() (map[string]*contentspb.GroupMembershipEntry_V1, error) {
	data, ok := d.Get(ComponentGroupMembership)
	if !ok {
		return nil, fmt.Errorf("GROUP_MEMBERSHIP: %w", ErrMissing)
	}
	var m contentspb.GroupMembership
	if err := proto.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("GROUP_MEMBERSHIP: %v: %w", err, ErrMalformed)
	}
	out := make(map[string]*contentspb.GroupMembershipEntry_V1, len(m.GetMembers()))
	for inbox, e := range m.GetMembers() {
		v1 := e.GetV1()
		if v1 == nil {
			return nil, fmt.Errorf("GROUP_MEMBERSHIP entry of %q has no V1: %w", inbox, ErrMalformed)
		}
		out[inbox] = v1
	}
	return out, nil
}

// EncodeMembership returns GROUP_MEMBERSHIP component data, encoded
// deterministically so that every member derives the same bytes.
func EncodeMembership(members map[string]*contentspb.GroupMembershipEntry_V1) []byte {
	m := &contentspb.GroupMembership{Members: make(map[string]*contentspb.GroupMembershipEntry, len(members))}
	for inbox, v1 := range members {
		m.Members[inbox] = &contentspb.GroupMembershipEntry{Version: &contentspb.GroupMembershipEntry_V1_{V1: v1}}
	}
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	return b
}

// Name returns the group name (0x8004); absent reads as "".
func (d Dictionary) Name() (string, error) {
	data, _ := d.Get(ComponentName)
	if !utf8.Valid(data) {
		return "", fmt.Errorf("name is not UTF-8: %w", ErrMalformed)
	}
	return string(data), nil
}

// CreatorInbox returns the creator inbox (0xBFFE).
func (d Dictionary) CreatorInbox() (string, error) {
	data, ok := d.Get(ComponentCreatorInbox)
	if !ok {
		return "", fmt.Errorf("creator inbox: %w", ErrMissing)
	}
	if !utf8.Valid(data) {
		return "", fmt.Errorf("creator inbox is not UTF-8: %w", ErrMalformed)
	}
	return string(data), nil
}

// OneshotMessage returns the ONESHOT_MESSAGE component (0xBFFC).
func (d Dictionary) OneshotMessage() (*contentspb.OneshotMessage, error) {
	data, ok := d.Get(ComponentOneshotMessage)
	if !ok {
		return nil, fmt.Errorf("ONESHOT_MESSAGE: %w", ErrMissing)
	}
	var m contentspb.OneshotMessage
	if err := proto.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("ONESHOT_MESSAGE: %v: %w", err, ErrMalformed)
	}
	return &m, nil
}

// MinProtocolVersion returns the minimum protocol version component
// (0x800A); ok is false when it is absent.
func (d Dictionary) MinProtocolVersion() (v Version, ok bool, err error) {
	data, ok := d.Get(ComponentMinProtocol)
	if !ok {
		return Version{}, false, nil
	}
	v, err = ParseVersion(string(data))
	return v, true, err
}

// Version is a protocol version "major.minor.patch" (CONF-050).
type Version struct{ Major, Minor, Patch uint32 }

// ParseVersion parses "major.minor.patch", each part a decimal number
// without sign or leading zeros beyond "0".
func ParseVersion(s string) (Version, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return Version{}, fmt.Errorf("version %q: %w", s, ErrMalformed)
	}
	var n [3]uint32
	for i, p := range parts {
		if p == "" || (len(p) > 1 && p[0] == '0') || strings.ContainsAny(p, "+-") {
			return Version{}, fmt.Errorf("version %q: %w", s, ErrMalformed)
		}
		v, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return Version{}, fmt.Errorf("version %q: %w", s, ErrMalformed)
		}
		n[i] = uint32(v)
	}
	return Version{n[0], n[1], n[2]}, nil
}

// String returns "major.minor.patch".
func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Compare returns -1, 0 or 1 as v is lower than, equal to or higher than
// w, comparing major, then minor, then patch numerically (CONF-050).
func (v Version) Compare(w Version) int {
	for _, p := range [][2]uint32{{v.Major, w.Major}, {v.Minor, w.Minor}, {v.Patch, w.Patch}} {
		switch {
		case p[0] < p[1]:
			return -1
		case p[0] > p[1]:
			return 1
		}
	}
	return 0
}

// DMID returns the dm id of a DM between two inboxes (COMP-021, DMS-001):
// "dm:" followed by the two inbox ids sorted bytewise and joined by ":".
func DMID(one, two string) string {
	ids := []string{one, two}
	sort.Strings(ids)
	return "dm:" + ids[0] + ":" + ids[1]
}

// PolicyVersion returns the role policy version component (0x8010,
// COMP-385); ok is false when it is absent. Its data is a big-endian
// uint16 other than 0; anything else wraps [ErrMalformed].
func (d Dictionary) PolicyVersion() (v uint16, ok bool, err error) {
	data, ok := d.Get(ComponentPolicyVersion)
	if !ok {
		return 0, false, nil
	}
	if len(data) != 2 || (data[0] == 0 && data[1] == 0) {
		return 0, true, fmt.Errorf("role policy version %x: %w", data, ErrMalformed)
	}
	return uint16(data[0])<<8 | uint16(data[1]), true, nil
}

// EncodePolicyVersion returns the role policy version component data.
func EncodePolicyVersion(v uint16) []byte { return []byte{byte(v >> 8), byte(v)} }
