package group

import (
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// Marshal serialises a pending commit (its message, Welcome and the state
// of the epoch it leads to) so that [LoadPending] restores it after a
// restart. The encoding holds secrets: store it as such.
func (p *Pending) Marshal() ([]byte, error) {
	if p == nil || p.next == nil {
		return nil, fmt.Errorf("%w: no pending commit", ErrInvalid)
	}
	next, err := p.next.Marshal()
	if err != nil {
		return nil, err
	}
	w := codec.NewWriter(len(next) + 1024)
	w.Uint8(stateVersion)
	p.Message.MarshalMLS(w)
	w.Bool(p.Welcome != nil)
	if p.Welcome != nil {
		p.Welcome.MarshalMLS(w)
	}
	w.Bool(p.RemovesSelf)
	p.Sender.MarshalMLS(w)
	w.Opaque(p.AuthenticatedData)
	w.Opaque(next)
	return w.Bytes()
}

// LoadPending restores a pending commit written by [Pending.Marshal].
func LoadPending(b []byte, psks PSKStore) (*Pending, error) {
	r := codec.NewReader(b)
	if v := r.Uint8(); v != stateVersion {
		return nil, fmt.Errorf("%w: pending state version %d", ErrInvalid, v)
	}
	p := &Pending{Message: new(framing.MLSMessage)}
	r.Value(p.Message)
	if r.Bool() {
		p.Welcome = new(message.Welcome)
		r.Value(p.Welcome)
	}
	p.RemovesSelf = r.Bool()
	r.Value(&p.Sender)
	p.AuthenticatedData = r.Opaque()
	next := r.Opaque()
	if err := r.Finish(); err != nil {
		return nil, fmt.Errorf("load pending commit: %w", err)
	}
	g, err := Load(next, psks)
	if err != nil {
		return nil, fmt.Errorf("load pending commit: %w", err)
	}
	p.next = g
	return p, nil
}
