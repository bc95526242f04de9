package framing

import (
	"crypto/rand"
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/secrettree"
)

// PrivateMessage is encrypted content (§6.3).
type PrivateMessage struct {
	GroupID             []byte
	Epoch               uint64
	ContentType         ContentType
	AuthenticatedData   []byte
	EncryptedSenderData []byte
	Ciphertext          []byte
}

// MarshalMLS writes the PrivateMessage.
func (p *PrivateMessage) MarshalMLS(w *codec.Writer) {
	w.Opaque(p.GroupID)
	w.Uint64(p.Epoch)
	w.Uint8(uint8(p.ContentType))
	w.Opaque(p.AuthenticatedData)
	w.Opaque(p.EncryptedSenderData)
	w.Opaque(p.Ciphertext)
}

// UnmarshalMLS reads a PrivateMessage.
func (p *PrivateMessage) UnmarshalMLS(r *codec.Reader) {
	p.GroupID = r.Opaque()
	p.Epoch = r.Uint64()
	p.ContentType = ContentType(r.Uint8())
	p.AuthenticatedData = r.Opaque()
	p.EncryptedSenderData = r.Opaque()
	p.Ciphertext = r.Opaque()
}

// contentAAD returns PrivateContentAAD (§6.3.1).
func (p *PrivateMessage) contentAAD() ([]byte, error) {
	w := codec.NewWriter(64 + len(p.GroupID) + len(p.AuthenticatedData))
	w.Opaque(p.GroupID)
	w.Uint64(p.Epoch)
	w.Uint8(uint8(p.ContentType))
	w.Opaque(p.AuthenticatedData)
	return w.Bytes()
}

func ratchetType(ct ContentType) secrettree.RatchetType {
	if ct == ContentApplication {
		return secrettree.Application
	}
	return secrettree.Handshake
}

// maxPadding bounds the padding a sender may request.
const maxPadding = 1 << 16

// Encrypt protects ac as a PrivateMessage (§6.3): it takes the next key of
// the sender's ratchet from tree, appends padding zero bytes, encrypts the
// sender data under sender_data_secret and draws a fresh reuse guard. Only
// member senders and content signed for WirePrivateMessage are allowed.
func Encrypt(s *ciphersuite.Suite, ac *AuthenticatedContent, tree *secrettree.Tree, senderDataSecret []byte, padding int) (*PrivateMessage, error) {
	if ac == nil || tree == nil {
		return nil, fmt.Errorf("%w: no content or secret tree", ErrNotAllowed)
	}
	c := &ac.Content
	if ac.WireFormat != WirePrivateMessage {
		return nil, fmt.Errorf("%w: content signed for wire format %d", ErrNotAllowed, ac.WireFormat)
	}
	if c.Sender.Type != SenderMember {
		return nil, fmt.Errorf("%w: PrivateMessage from sender type %d", ErrNotAllowed, c.Sender.Type)
	}
	if padding < 0 || padding > maxPadding {
		return nil, fmt.Errorf("%w: padding of %d bytes", ErrNotAllowed, padding)
	}
	if c.ContentType == ContentCommit && len(ac.Auth.ConfirmationTag) == 0 {
		return nil, fmt.Errorf("%w: commit without confirmation tag", ErrNotAllowed)
	}
	w := codec.NewWriter(256 + padding)
	marshalBody(w, c.ContentType, c.Application, c.Proposal, c.Commit)
	ac.Auth.marshal(w, c.ContentType)
	w.Raw(make([]byte, padding))
	plaintext, err := w.Bytes()
	if err != nil {
		return nil, fmt.Errorf("encrypt: %w", err)
	}
	pm := &PrivateMessage{GroupID: c.GroupID, Epoch: c.Epoch, ContentType: c.ContentType, AuthenticatedData: c.AuthenticatedData}
	aad, err := pm.contentAAD()
	if err != nil {
		return nil, fmt.Errorf("encrypt: %w", err)
	}
	kn, err := tree.Next(c.Sender.LeafIndex, ratchetType(c.ContentType))
	if err != nil {
		return nil, fmt.Errorf("encrypt: %w", err)
	}
	sd := SenderData{LeafIndex: c.Sender.LeafIndex, Generation: kn.Generation}
	if _, err := rand.Read(sd.ReuseGuard[:]); err != nil {
		return nil, fmt.Errorf("encrypt: reuse guard: %w", err)
	}
	pm.Ciphertext, err = s.Seal(kn.Key, guardNonce(kn.Nonce, sd.ReuseGuard), aad, plaintext)
	clear(kn.Key)
	if err != nil {
		return nil, fmt.Errorf("encrypt: %w", err)
	}
	if pm.EncryptedSenderData, err = sealSenderData(s, pm, senderDataSecret, &sd); err != nil {
		return nil, fmt.Errorf("encrypt: %w", err)
	}
	return pm, nil
}

// guardNonce XORs the reuse guard into the first four bytes of a copy of nonce.
func guardNonce(nonce []byte, guard [4]byte) []byte {
	n := append([]byte(nil), nonce...)
	for i := 0; i < 4 && i < len(n); i++ {
		n[i] ^= guard[i]
	}
	return n
}

// Decrypt unprotects a PrivateMessage (§6.3): it decrypts the sender data,
// opens the content with the sender's ratchet key from tree (erasing the key
// on success), checks the padding and returns the AuthenticatedContent. The
// caller still verifies the signature with the sender's key. Failures wrap
// ErrDecrypt, or a codec error for malformed plaintext.
func Decrypt(s *ciphersuite.Suite, pm *PrivateMessage, tree *secrettree.Tree, senderDataSecret []byte) (*AuthenticatedContent, error) {
	if pm == nil || tree == nil {
		return nil, fmt.Errorf("%w: no message or secret tree", ErrDecrypt)
	}
	switch pm.ContentType {
	case ContentApplication, ContentProposal, ContentCommit:
	default:
		return nil, fmt.Errorf("%w: content type %d", ErrDecrypt, pm.ContentType)
	}
	sd, err := DecryptSenderData(s, pm, senderDataSecret)
	if err != nil {
		return nil, err
	}
	aad, err := pm.contentAAD()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecrypt, err)
	}
	var ac *AuthenticatedContent
	used := false
	err = tree.Open(sd.LeafIndex, ratchetType(pm.ContentType), sd.Generation, func(kn secrettree.KeyNonce) error {
		used = true
		pt, err := s.Open(kn.Key, guardNonce(kn.Nonce, sd.ReuseGuard), aad, pm.Ciphertext)
		if err != nil {
			return fmt.Errorf("%w: content: %v", ErrDecrypt, err)
		}
		ac, err = parsePlaintext(pm, sd, pt)
		return err
	})
	if err != nil && !used { // no key: unknown leaf, used or too distant generation
		return nil, fmt.Errorf("%w: %w", ErrDecrypt, err)
	}
	if err != nil {
		return nil, err
	}
	return ac, nil
}

// parsePlaintext decodes PrivateMessageContent and rebuilds the content.
func parsePlaintext(pm *PrivateMessage, sd *SenderData, pt []byte) (*AuthenticatedContent, error) {
	r := codec.NewReader(pt)
	app, p, c := unmarshalBody(r, pm.ContentType)
	ac := &AuthenticatedContent{WireFormat: WirePrivateMessage, Content: FramedContent{
		GroupID: pm.GroupID, Epoch: pm.Epoch, Sender: Sender{Type: SenderMember, LeafIndex: sd.LeafIndex},
		AuthenticatedData: pm.AuthenticatedData, ContentType: pm.ContentType,
		Application: app, Proposal: p, Commit: c,
	}}
	ac.Auth.unmarshal(r, pm.ContentType)
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("private message content: %w", err)
	}
	for _, b := range r.Raw(r.Len()) {
		if b != 0 {
			return nil, fmt.Errorf("private message content: %w: non-zero padding", codec.ErrInvalidValue)
		}
	}
	return ac, nil
}
