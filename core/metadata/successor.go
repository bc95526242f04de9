package metadata

import "fmt"

// ComponentSuccessor is the successor group component (COMP-483): the id
// of the group its super admins moved the conversation to (ADR-0030
// Decision 6's last resort). Mutable; super admins change it.
const ComponentSuccessor uint16 = 0x8012

// Successor returns the successor group component's group id; ok is
// false when it is absent. Its data is a group id of 16 or 32 bytes;
// anything else wraps [ErrMalformed].
func (d Dictionary) Successor() (groupID []byte, ok bool, err error) {
	data, ok := d.Get(ComponentSuccessor)
	if !ok {
		return nil, false, nil
	}
	if len(data) != 16 && len(data) != 32 {
		return nil, true, fmt.Errorf("successor group id of %d bytes: %w", len(data), ErrMalformed)
	}
	return append([]byte(nil), data...), true, nil
}
