package framing

import (
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// MLSMessage is the envelope of every MLS message on the wire (§6).
// WireFormat selects which one body field is set.
type MLSMessage struct {
	Version    message.ProtocolVersion
	WireFormat WireFormat
	Public     *PublicMessage
	Private    *PrivateMessage
	Welcome    *message.Welcome
	GroupInfo  *message.GroupInfo
	KeyPackage *message.KeyPackage
}

// MarshalMLS writes the MLSMessage; a wire format without its body is an error.
func (m *MLSMessage) MarshalMLS(w *codec.Writer) {
	w.Uint16(uint16(m.Version))
	w.Uint16(uint16(m.WireFormat))
	var body codec.Marshaler
	switch {
	case m.WireFormat == WirePublicMessage && m.Public != nil:
		body = m.Public
	case m.WireFormat == WirePrivateMessage && m.Private != nil:
		body = m.Private
	case m.WireFormat == WireWelcome && m.Welcome != nil:
		body = m.Welcome
	case m.WireFormat == WireGroupInfo && m.GroupInfo != nil:
		body = m.GroupInfo
	case m.WireFormat == WireKeyPackage && m.KeyPackage != nil:
		body = m.KeyPackage
	default:
		w.Fail(fmt.Errorf("%w: wire format %d without its body", message.ErrUnknownType, m.WireFormat))
		return
	}
	body.MarshalMLS(w)
}

// UnmarshalMLS reads an MLSMessage.
func (m *MLSMessage) UnmarshalMLS(r *codec.Reader) {
	*m = MLSMessage{Version: message.ProtocolVersion(r.Uint16()), WireFormat: WireFormat(r.Uint16())}
	if r.Err() != nil {
		return
	}
	switch m.WireFormat {
	case WirePublicMessage:
		m.Public = new(PublicMessage)
		r.Value(m.Public)
	case WirePrivateMessage:
		m.Private = new(PrivateMessage)
		r.Value(m.Private)
	case WireWelcome:
		m.Welcome = new(message.Welcome)
		r.Value(m.Welcome)
	case WireGroupInfo:
		m.GroupInfo = new(message.GroupInfo)
		r.Value(m.GroupInfo)
	case WireKeyPackage:
		m.KeyPackage = new(message.KeyPackage)
		r.Value(m.KeyPackage)
	default:
		r.Fail(fmt.Errorf("%w: wire format %d", message.ErrUnknownType, m.WireFormat))
	}
}

// Decode parses one complete MLSMessage from b.
func Decode(b []byte) (*MLSMessage, error) {
	var m MLSMessage
	if err := codec.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decode mls message: %w", err)
	}
	return &m, nil
}

// DecodeView is Decode for a message read and dropped within a call: its
// byte slices are views of b (codec.NewViewReader), so b must not change
// while the message is in use, and nothing kept may hold them.
func DecodeView(b []byte) (*MLSMessage, error) {
	var m MLSMessage
	if err := codec.UnmarshalView(b, &m); err != nil {
		return nil, fmt.Errorf("decode mls message: %w", err)
	}
	return &m, nil
}
