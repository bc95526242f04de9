package mlsframe

// ContentApplication is the content type of an application message
// (RFC 9420 §6).
const ContentApplication = 1

// PeekAuthenticatedData reads the content type and authenticated_data of
// a PublicMessage or PrivateMessage without decrypting it: both framings
// carry them in the clear (RFC 9420 §6.2, §6.3), authenticated by the
// message's signature or AEAD. ok is false for anything else or anything
// truncated. aad aliases b.
func PeekAuthenticatedData(b []byte) (contentType uint8, aad []byte, ok bool) {
	r := reader{b: b}
	if r.u16() != 1 { // mls10
		return 0, nil, false
	}
	wireFormat := r.u16()
	if wireFormat != WirePublicMessage && wireFormat != WirePrivateMessage {
		return 0, nil, false
	}
	r.vector() // group_id
	r.u64()    // epoch
	if wireFormat == WirePrivateMessage {
		contentType = r.u8()
		aad = r.vectorBody()
		return contentType, aad, !r.bad
	}
	switch r.u8() { // sender_type
	case 1, 2: // member, external: a uint32 index
		r.u32()
	case 3, 4: // new_member_proposal, new_member_commit
	default:
		return 0, nil, false
	}
	aad = r.vectorBody()
	contentType = r.u8()
	return contentType, aad, !r.bad
}

// PeekPrivate is [PeekAuthenticatedData] of a PrivateMessage only (RFC
// 9420 §6.3): ok is false for any other wire format.
func PeekPrivate(b []byte) (contentType uint8, ad []byte, ok bool) {
	if len(b) < 4 || uint16(b[2])<<8|uint16(b[3]) != WirePrivateMessage {
		return 0, nil, false
	}
	return PeekAuthenticatedData(b)
}
