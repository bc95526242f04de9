package message

import (
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
)

// GroupInfo describes a group to joiners (§12.4.3).
type GroupInfo struct {
	GroupContext    GroupContext
	Extensions      Extensions
	ConfirmationTag []byte
	Signer          uint32
	Signature       []byte
}

const groupInfoSignLabel = "GroupInfoTBS"

func (g *GroupInfo) marshalContent(w *codec.Writer) {
	g.GroupContext.MarshalMLS(w)
	g.Extensions.MarshalMLS(w)
	w.Opaque(g.ConfirmationTag)
	w.Uint32(g.Signer)
}

// MarshalMLS writes the GroupInfo.
func (g *GroupInfo) MarshalMLS(w *codec.Writer) {
	g.marshalContent(w)
	w.Opaque(g.Signature)
}

// UnmarshalMLS reads a GroupInfo.
func (g *GroupInfo) UnmarshalMLS(r *codec.Reader) {
	r.Value(&g.GroupContext)
	r.Value(&g.Extensions)
	g.ConfirmationTag = r.Opaque()
	g.Signer = r.Uint32()
	g.Signature = r.Opaque()
}

// TBS returns the GroupInfoTBS encoding.
func (g *GroupInfo) TBS() ([]byte, error) {
	w := codec.NewWriter(256)
	g.marshalContent(w)
	return w.Bytes()
}

// Sign sets g.Signature to SignWithLabel(priv, "GroupInfoTBS", TBS).
func (g *GroupInfo) Sign(s *ciphersuite.Suite, priv []byte) error {
	tbs, err := g.TBS()
	if err != nil {
		return err
	}
	sig, err := s.SignWithLabel(priv, groupInfoSignLabel, tbs)
	if err != nil {
		return fmt.Errorf("sign group info: %w", err)
	}
	g.Signature = sig
	return nil
}

// Verify checks g.Signature under the signer's public key.
func (g *GroupInfo) Verify(s *ciphersuite.Suite, signerKey []byte) error {
	// The TBS carries the ratchet tree: encode it once, labeled in place.
	size := 512
	for _, e := range g.Extensions {
		size += len(e.Data) + 8
	}
	for _, e := range g.GroupContext.Extensions {
		size += len(e.Data) + 8
	}
	signed, err := ciphersuite.Labeled(groupInfoSignLabel, size, g.marshalContent)
	if err != nil {
		return err
	}
	if err := s.Verify(signerKey, signed, g.Signature); err != nil {
		return fmt.Errorf("verify group info: %w", err)
	}
	return nil
}

// GroupInfoHeadroom is the room [GroupInfoSignContent] needs before an
// encoded GroupInfo: the SignContent header (its label and the TBS's
// length).
const GroupInfoHeadroom = 1 + len(ciphersuite.LabelPrefix+groupInfoSignLabel) + 4

// GroupInfoSignContent returns the SignContent a GroupInfo's signature
// covers (§5.1.2, "GroupInfoTBS") without encoding the GroupInfo again:
// buf[off:] is the encoding g was decoded from, exactly (no trailing
// bytes), and buf[off-GroupInfoHeadroom:off] is free room, into which the
// header is written. The GroupInfoTBS is the encoding up to the
// signature, as the decoder accepts only encodings it writes back the
// same (minimal lengths, presence bytes 0 or 1). The result is a slice
// of buf, valid while buf is.
func GroupInfoSignContent(buf []byte, off int, g *GroupInfo) ([]byte, error) {
	if off < GroupInfoHeadroom || off > len(buf) {
		return nil, fmt.Errorf("group info sign content: %d bytes of headroom, need %d", off, GroupInfoHeadroom)
	}
	sig, err := codec.AppendLength(nil, len(g.Signature))
	if err != nil {
		return nil, err
	}
	tbs := len(buf) - off - len(sig) - len(g.Signature)
	if tbs < 0 {
		return nil, fmt.Errorf("group info sign content: %d bytes hold no signature of %d", len(buf)-off, len(g.Signature))
	}
	head := codec.NewWriter(GroupInfoHeadroom)
	head.Opaque([]byte(ciphersuite.LabelPrefix + groupInfoSignLabel))
	hb, err := head.Bytes()
	if err != nil {
		return nil, err
	}
	if hb, err = codec.AppendLength(hb, tbs); err != nil {
		return nil, err
	}
	start := off - len(hb)
	copy(buf[start:off], hb)
	return buf[start : off+tbs], nil
}

// VerifySignContent checks g.Signature over signed, the SignContent of g
// as [GroupInfoSignContent] returns it.
func (g *GroupInfo) VerifySignContent(s *ciphersuite.Suite, signerKey, signed []byte) error {
	if err := s.Verify(signerKey, signed, g.Signature); err != nil {
		return fmt.Errorf("verify group info: %w", err)
	}
	return nil
}

// PathSecret is the path secret given to a joiner (§12.4.3.1).
type PathSecret struct{ Secret []byte }

// GroupSecrets is what a Welcome encrypts to each joiner (§12.4.3.1).
type GroupSecrets struct {
	JoinerSecret []byte
	PathSecret   *PathSecret
	PSKs         []PreSharedKeyID
}

// MarshalMLS writes the GroupSecrets.
func (g *GroupSecrets) MarshalMLS(w *codec.Writer) {
	w.Opaque(g.JoinerSecret)
	w.Bool(g.PathSecret != nil)
	if g.PathSecret != nil {
		w.Opaque(g.PathSecret.Secret)
	}
	w.Vector(func(w *codec.Writer) {
		for i := range g.PSKs {
			g.PSKs[i].MarshalMLS(w)
		}
	})
}

// UnmarshalMLS reads GroupSecrets.
func (g *GroupSecrets) UnmarshalMLS(r *codec.Reader) {
	g.JoinerSecret = r.Opaque()
	g.PathSecret = nil
	if r.Bool() {
		g.PathSecret = &PathSecret{Secret: r.Opaque()}
	}
	g.PSKs = []PreSharedKeyID{}
	r.VectorEach(func(s *codec.Reader) {
		var p PreSharedKeyID
		p.UnmarshalMLS(s)
		g.PSKs = append(g.PSKs, p)
	})
}

// EncryptedGroupSecrets is GroupSecrets sealed to one joiner's init key.
type EncryptedGroupSecrets struct {
	NewMember             []byte
	EncryptedGroupSecrets HPKECiphertext
}

// MarshalMLS writes the EncryptedGroupSecrets.
func (e *EncryptedGroupSecrets) MarshalMLS(w *codec.Writer) {
	w.Opaque(e.NewMember)
	e.EncryptedGroupSecrets.MarshalMLS(w)
}

// UnmarshalMLS reads EncryptedGroupSecrets.
func (e *EncryptedGroupSecrets) UnmarshalMLS(r *codec.Reader) {
	e.NewMember = r.Opaque()
	r.Value(&e.EncryptedGroupSecrets)
}

// Welcome brings new members into a group (§12.4.3.1).
type Welcome struct {
	CipherSuite        ciphersuite.ID
	Secrets            []EncryptedGroupSecrets
	EncryptedGroupInfo []byte
}

// MarshalMLS writes the Welcome.
func (m *Welcome) MarshalMLS(w *codec.Writer) {
	w.Uint16(uint16(m.CipherSuite))
	w.Vector(func(w *codec.Writer) {
		for i := range m.Secrets {
			m.Secrets[i].MarshalMLS(w)
		}
	})
	w.Opaque(m.EncryptedGroupInfo)
}

// UnmarshalMLS reads a Welcome.
func (m *Welcome) UnmarshalMLS(r *codec.Reader) {
	m.CipherSuite = ciphersuite.ID(r.Uint16())
	m.Secrets = []EncryptedGroupSecrets{}
	r.VectorEach(func(s *codec.Reader) {
		var e EncryptedGroupSecrets
		e.UnmarshalMLS(s)
		m.Secrets = append(m.Secrets, e)
	})
	m.EncryptedGroupInfo = r.Opaque()
}

// Find returns the EncryptedGroupSecrets addressed to the KeyPackageRef ref.
func (m *Welcome) Find(ref []byte) (*EncryptedGroupSecrets, bool) {
	for i := range m.Secrets {
		if string(m.Secrets[i].NewMember) == string(ref) {
			return &m.Secrets[i], true
		}
	}
	return nil, false
}
