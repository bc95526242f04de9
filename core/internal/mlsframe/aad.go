package mlsframe

// ContentApplication is the content type of an application message
// (RFC 9420 §6).
const ContentApplication = 1

// PeekPrivate reads the content type and authenticated_data of a
// PrivateMessage (RFC 9420 §6.3), both in the clear before its
// encrypted sender data; ad shares memory with b. ok is false for any
// other wire format or anything truncated.
func PeekPrivate(b []byte) (contentType uint8, ad []byte, ok bool) {
	r := reader{b: b}
	if r.u16() != 1 || r.u16() != WirePrivateMessage { // mls10, private_message
		return 0, nil, false
	}
	r.vector() // group_id
	r.u64()    // epoch
	contentType = r.u8()
	ad = r.vectorBody()
	return contentType, ad, !r.bad
}
