package delivery

import "github.com/regroup-mls/regroup/core/internal/mlsframe"

// frame is what commit acceptance reads of an MLSMessage before it hands
// it to the validator: its wire format and, for a PublicMessage or
// PrivateMessage, its content type. Both framings carry the content type
// in the clear (RFC 9420 §6.2, §6.3); the validator authenticates it.
type frame struct {
	wireFormat  uint16
	contentType uint8
}

const (
	wirePublicMessage  = mlsframe.WirePublicMessage
	wirePrivateMessage = mlsframe.WirePrivateMessage
	wireGroupInfo      = mlsframe.WireGroupInfo
	contentCommit      = mlsframe.ContentCommit
)

// isGroupInfo reports whether b starts as an MLSMessage of wire format
// group_info.
func isGroupInfo(b []byte) bool { return mlsframe.IsGroupInfo(b) }

// peekFrame reads the frame of a PublicMessage or PrivateMessage; ok is
// false for anything else or anything truncated.
func peekFrame(b []byte) (f frame, ok bool) {
	f.wireFormat, _, f.contentType, ok = mlsframe.Peek(b)
	return f, ok
}
