package message

import (
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
)

// PSKType tells an external PSK from a resumption PSK (§8.4).
type PSKType uint8

// PSK types.
const (
	PSKExternal   PSKType = 1
	PSKResumption PSKType = 2
)

// ResumptionPSKUsage says what a resumption PSK is used for (§8.4).
type ResumptionPSKUsage uint8

// Resumption PSK usages.
const (
	UsageApplication ResumptionPSKUsage = 1
	UsageReInit      ResumptionPSKUsage = 2
	UsageBranch      ResumptionPSKUsage = 3
)

// PreSharedKeyID names a PSK (§8.4). ID is set for external PSKs; Usage,
// GroupID and Epoch for resumption PSKs.
type PreSharedKeyID struct {
	Type    PSKType
	ID      []byte
	Usage   ResumptionPSKUsage
	GroupID []byte
	Epoch   uint64
	Nonce   []byte
}

// MarshalMLS writes the PreSharedKeyID.
func (p *PreSharedKeyID) MarshalMLS(w *codec.Writer) {
	w.Uint8(uint8(p.Type))
	switch p.Type {
	case PSKExternal:
		w.Opaque(p.ID)
	case PSKResumption:
		w.Uint8(uint8(p.Usage))
		w.Opaque(p.GroupID)
		w.Uint64(p.Epoch)
	default:
		w.Fail(fmt.Errorf("%w: psk type %d", ErrUnknownType, p.Type))
	}
	w.Opaque(p.Nonce)
}

// UnmarshalMLS reads a PreSharedKeyID.
func (p *PreSharedKeyID) UnmarshalMLS(r *codec.Reader) {
	p.Type = PSKType(r.Uint8())
	switch p.Type {
	case PSKExternal:
		p.ID = r.Opaque()
	case PSKResumption:
		p.Usage = ResumptionPSKUsage(r.Uint8())
		p.GroupID = r.Opaque()
		p.Epoch = r.Uint64()
	default:
		r.Fail(fmt.Errorf("%w: psk type %d", ErrUnknownType, p.Type))
	}
	p.Nonce = r.Opaque()
}
