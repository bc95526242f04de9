package framing

import (
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// WireFormat says how an MLSMessage is carried (§6).
type WireFormat uint16

// Wire formats of RFC 9420.
const (
	WirePublicMessage  WireFormat = 1
	WirePrivateMessage WireFormat = 2
	WireWelcome        WireFormat = 3
	WireGroupInfo      WireFormat = 4
	WireKeyPackage     WireFormat = 5
)

// ContentType says what a FramedContent carries (§6).
type ContentType uint8

// Content types.
const (
	ContentApplication ContentType = 1
	ContentProposal    ContentType = 2
	ContentCommit      ContentType = 3
)

// SenderType says who sent a message (§6).
type SenderType uint8

// Sender types.
const (
	SenderMember            SenderType = 1
	SenderExternal          SenderType = 2
	SenderNewMemberProposal SenderType = 3
	SenderNewMemberCommit   SenderType = 4
)

// Sender identifies the author of a message: LeafIndex for a member,
// SenderIndex (into the external_senders extension) for an external sender.
type Sender struct {
	Type        SenderType
	LeafIndex   uint32
	SenderIndex uint32
}

// MarshalMLS writes the Sender.
func (s *Sender) MarshalMLS(w *codec.Writer) {
	w.Uint8(uint8(s.Type))
	switch s.Type {
	case SenderMember:
		w.Uint32(s.LeafIndex)
	case SenderExternal:
		w.Uint32(s.SenderIndex)
	case SenderNewMemberProposal, SenderNewMemberCommit:
	default:
		w.Fail(fmt.Errorf("%w: sender type %d", message.ErrUnknownType, s.Type))
	}
}

// UnmarshalMLS reads a Sender.
func (s *Sender) UnmarshalMLS(r *codec.Reader) {
	s.Type = SenderType(r.Uint8())
	switch s.Type {
	case SenderMember:
		s.LeafIndex = r.Uint32()
	case SenderExternal:
		s.SenderIndex = r.Uint32()
	case SenderNewMemberProposal, SenderNewMemberCommit:
	default:
		r.Fail(fmt.Errorf("%w: sender type %d", message.ErrUnknownType, s.Type))
	}
}
