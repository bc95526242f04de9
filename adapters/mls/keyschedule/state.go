package keyschedule

import "github.com/regroup-mls/regroup/adapters/mls/codec"

func (e *Epoch) fields() []*[]byte {
	return []*[]byte{&e.JoinerSecret, &e.WelcomeSecret, &e.EpochSecret, &e.SenderDataSecret, &e.EncryptionSecret,
		&e.ExporterSecret, &e.ExternalSecret, &e.ConfirmationKey, &e.MembershipKey, &e.ResumptionPSK,
		&e.EpochAuthenticator, &e.InitSecret}
}

// MarshalMLS writes every secret of the epoch. The encoding holds secrets:
// store it as such.
func (e *Epoch) MarshalMLS(w *codec.Writer) {
	for _, f := range e.fields() {
		w.Opaque(*f)
	}
}

// UnmarshalMLS reads an Epoch written by MarshalMLS.
func (e *Epoch) UnmarshalMLS(r *codec.Reader) {
	for _, f := range e.fields() {
		*f = r.Opaque()
	}
}

// Erase overwrites every secret of the epoch.
func (e *Epoch) Erase() {
	for _, f := range e.fields() {
		clear(*f)
	}
}

// Clone returns a copy of the epoch whose secrets are copies, so that
// erasing one leaves the other intact.
func (e *Epoch) Clone() *Epoch {
	c := *e
	for _, f := range c.fields() {
		*f = append([]byte(nil), *f...)
	}
	return &c
}
