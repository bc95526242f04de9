package client

import "encoding/binary"

// header is what the client reads from an MLSMessage's public framing
// before processing it: whether it is a commit and which epoch it names.
// Both framings (RFC 9420 §6.2, §6.3) carry the epoch and content type in
// the clear; the engine authenticates them when it processes the message.
type header struct {
	wireFormat  uint16
	epoch       uint64
	contentType uint8
}

const (
	wirePublicMessage  = 1
	wirePrivateMessage = 2
	contentCommit      = 3
)

func (h header) commit() bool { return h.contentType == contentCommit }

// peekHeader reads the header of a PublicMessage or PrivateMessage; ok is
// false for anything else or anything truncated.
func peekHeader(b []byte) (h header, ok bool) {
	r := reader{b: b}
	if r.u16() != 1 { // mls10
		return h, false
	}
	h.wireFormat = r.u16()
	if h.wireFormat != wirePublicMessage && h.wireFormat != wirePrivateMessage {
		return h, false
	}
	r.vector() // group_id
	h.epoch = r.u64()
	if h.wireFormat == wirePrivateMessage {
		h.contentType = r.u8()
		return h, !r.bad
	}
	switch r.u8() { // sender_type
	case 1, 2: // member, external: a uint32 index
		r.u32()
	case 3, 4: // new_member_proposal, new_member_commit
	default:
		return h, false
	}
	r.vector() // authenticated_data
	h.contentType = r.u8()
	return h, !r.bad
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
