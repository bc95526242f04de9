// Package mlsframe reads what regroup needs of an MLSMessage's public
// framing before an engine or validator authenticates it (RFC 9420 §6):
// the wire format, the epoch and content type of a PublicMessage or
// PrivateMessage, and the group id and epoch of a GroupInfo. The client
// and the delivery service share it.
package mlsframe

import "encoding/binary"

// Wire formats and the content type regroup reads (RFC 9420 §6).
const (
	WirePublicMessage  = 1
	WirePrivateMessage = 2
	WireGroupInfo      = 4
	ContentCommit      = 3
)

// Peek reads the wire format, epoch and content type of a PublicMessage
// or PrivateMessage. Both framings (RFC 9420 §6.2, §6.3) carry them in
// the clear; ok is false for anything else or anything truncated.
func Peek(b []byte) (wireFormat uint16, epoch uint64, contentType uint8, ok bool) {
	r := reader{b: b}
	if r.u16() != 1 { // mls10
		return 0, 0, 0, false
	}
	wireFormat = r.u16()
	if wireFormat != WirePublicMessage && wireFormat != WirePrivateMessage {
		return 0, 0, 0, false
	}
	r.vector() // group_id
	epoch = r.u64()
	if wireFormat == WirePrivateMessage {
		contentType = r.u8()
		return wireFormat, epoch, contentType, !r.bad
	}
	switch r.u8() { // sender_type
	case 1, 2: // member, external: a uint32 index
		r.u32()
	case 3, 4: // new_member_proposal, new_member_commit
	default:
		return 0, 0, 0, false
	}
	r.vector() // authenticated_data
	contentType = r.u8()
	return wireFormat, epoch, contentType, !r.bad
}

// IsGroupInfo reports whether b starts as an MLSMessage of wire format
// group_info.
func IsGroupInfo(b []byte) bool {
	return len(b) >= 4 && binary.BigEndian.Uint16(b) == 1 && binary.BigEndian.Uint16(b[2:]) == WireGroupInfo
}

// PeekGroupInfo reads the group id and epoch of a GroupInfo MLSMessage
// (RFC 9420 §12.4.3: a GroupInfo starts with its GroupContext); groupID
// shares memory with b; ok is false for anything else or anything
// truncated.
func PeekGroupInfo(b []byte) (groupID []byte, epoch uint64, ok bool) {
	r := reader{b: b}
	if r.u16() != 1 || r.u16() != WireGroupInfo { // mls10, group_info
		return nil, 0, false
	}
	if r.u16() != 1 { // GroupContext.version
		return nil, 0, false
	}
	r.u16() // cipher_suite
	groupID = r.vectorBody()
	epoch = r.u64()
	return groupID, epoch, !r.bad
}

// reader reads the TLS presentation language of RFC 9420 §2.1; any read
// past the end sets bad.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) take(n int) []byte {
	if r.bad || n < 0 || len(r.b) < n {
		r.bad = true
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u8() uint8 {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if b := r.take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

// vector skips a variable-length vector (RFC 9420 §2.1.2).
func (r *reader) vector() { r.vectorBody() }

// vectorBody reads a variable-length vector (RFC 9420 §2.1.2) and returns
// its body, which shares memory with the input.
func (r *reader) vectorBody() []byte {
	first := r.take(1)
	if first == nil {
		return nil
	}
	n := int(first[0] & 0x3f)
	switch first[0] >> 6 {
	case 0:
	case 1:
		n = n<<8 | int(r.u8())
	case 2:
		n = n<<24 | int(r.u8())<<16 | int(r.u16())
	default:
		r.bad = true
		return nil
	}
	return r.take(n)
}

// PeekGroupInfoTreeHash is PeekGroupInfo that also reads the group
// context's tree_hash; both slices share memory with b.
func PeekGroupInfoTreeHash(b []byte) (groupID []byte, epoch uint64, treeHash []byte, ok bool) {
	r := reader{b: b}
	if r.u16() != 1 || r.u16() != WireGroupInfo || r.u16() != 1 {
		return nil, 0, nil, false
	}
	r.u16()
	groupID = r.vectorBody()
	epoch = r.u64()
	treeHash = r.vectorBody()
	return groupID, epoch, treeHash, !r.bad
}
