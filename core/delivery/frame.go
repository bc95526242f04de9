package delivery

import "encoding/binary"

// frame is what commit acceptance reads of an MLSMessage before it hands
// it to the validator: its wire format and, for a PublicMessage or
// PrivateMessage, its content type. Both framings carry the content type
// in the clear (RFC 9420 §6.2, §6.3); the validator authenticates it.
type frame struct {
	wireFormat  uint16
	contentType uint8
}

const (
	wirePublicMessage  = 1
	wirePrivateMessage = 2
	wireGroupInfo      = 4
	contentCommit      = 3
)

// isGroupInfo reports whether b starts as an MLSMessage of wire format
// group_info.
func isGroupInfo(b []byte) bool {
	return len(b) >= 4 && binary.BigEndian.Uint16(b) == 1 && binary.BigEndian.Uint16(b[2:]) == wireGroupInfo
}

// peekFrame reads the frame of a PublicMessage or PrivateMessage; ok is
// false for anything else or anything truncated.
func peekFrame(b []byte) (f frame, ok bool) {
	r := tlsReader{b: b}
	if r.u16() != 1 { // mls10
		return f, false
	}
	f.wireFormat = r.u16()
	if f.wireFormat != wirePublicMessage && f.wireFormat != wirePrivateMessage {
		return f, false
	}
	r.vector() // group_id
	r.take(8)  // epoch
	if f.wireFormat == wirePrivateMessage {
		f.contentType = r.u8()
		return f, !r.bad
	}
	switch r.u8() { // sender_type
	case 1, 2: // member, external: a uint32 index
		r.take(4)
	case 3, 4: // new_member_proposal, new_member_commit
	default:
		return f, false
	}
	r.vector() // authenticated_data
	f.contentType = r.u8()
	return f, !r.bad
}

// tlsReader reads the TLS presentation language of RFC 9420 §2.1; a read
// past the end sets bad.
type tlsReader struct {
	b   []byte
	bad bool
}

func (r *tlsReader) take(n int) []byte {
	if r.bad || n < 0 || len(r.b) < n {
		r.bad = true
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *tlsReader) u8() uint8 {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *tlsReader) u16() uint16 {
	if b := r.take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

// vector skips a variable-length vector (RFC 9420 §2.1.2: a 1, 2 or 4
// byte length prefix whose top two bits give its size).
func (r *tlsReader) vector() {
	first := r.take(1)
	if first == nil {
		return
	}
	n := int(first[0] & 0x3f)
	switch first[0] >> 6 {
	case 0:
	case 1:
		if b := r.take(1); b != nil {
			n = n<<8 | int(b[0])
		}
	case 2:
		if b := r.take(3); b != nil {
			n = n<<24 | int(b[0])<<16 | int(b[1])<<8 | int(b[2])
		}
	default:
		r.bad = true
		return
	}
	r.take(n)
}
