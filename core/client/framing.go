package client

import "github.com/regroup-mls/regroup/core/internal/mlsframe"

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
	wirePublicMessage  = mlsframe.WirePublicMessage
	wirePrivateMessage = mlsframe.WirePrivateMessage
	contentCommit      = mlsframe.ContentCommit
)

func (h header) commit() bool { return h.contentType == contentCommit }

// peekHeader reads the header of a PublicMessage or PrivateMessage; ok is
// false for anything else or anything truncated.
func peekHeader(b []byte) (h header, ok bool) {
	h.wireFormat, h.epoch, h.contentType, ok = mlsframe.Peek(b)
	return h, ok
}
