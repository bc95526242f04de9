// Package welcome implements the cryptography of the MLS Welcome message
// (RFC 9420 §12.4.3.1): sealing GroupSecrets to each joiner's init key and
// the GroupInfo under the welcome secret, and, on the joiner's side,
// finding and opening its GroupSecrets, decrypting the GroupInfo and
// checking its signature and confirmation tag.
//
// # Errors
//
// A Welcome with no entry for the joiner's KeyPackage is [ErrNotForMe];
// any failure to decrypt is [ErrDecrypt]; a GroupInfo whose signature or
// confirmation tag is wrong is [ErrInvalid].
package welcome

import (
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/keyschedule"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// Sentinel errors.
var (
	// ErrNotForMe means the Welcome holds no secrets for the KeyPackage.
	ErrNotForMe = errors.New("welcome: not addressed to this key package")
	// ErrDecrypt means the GroupSecrets or the GroupInfo did not decrypt.
	ErrDecrypt = errors.New("welcome: cannot decrypt")
	// ErrInvalid means the GroupInfo's signature or confirmation tag is wrong,
	// or its suite differs from the Welcome's.
	ErrInvalid = errors.New("welcome: invalid group info")
)

// encryptLabel is the EncryptWithLabel label of GroupSecrets.
const encryptLabel = "Welcome"

// Recipient is one joiner of a Welcome: its KeyPackage and, when the
// committer sent a path, the path secret of the joiner's lowest common
// ancestor with the committer.
type Recipient struct {
	KeyPackage *message.KeyPackage
	PathSecret []byte
}

// Seal builds a Welcome (§12.4.3.1): gi (already signed) encrypted under
// the key derived from welcomeSecret, and for each recipient GroupSecrets
// {joinerSecret, its path secret, psks} sealed to its init key.
func Seal(s *ciphersuite.Suite, gi *message.GroupInfo, joinerSecret, welcomeSecret []byte,
	psks []message.PreSharedKeyID, recipients []Recipient) (*message.Welcome, error) {
	if gi == nil {
		return nil, fmt.Errorf("%w: no group info", ErrInvalid)
	}
	giBytes, err := codec.Marshal(gi)
	if err != nil {
		return nil, fmt.Errorf("seal welcome: %w", err)
	}
	key, nonce, err := keyschedule.WelcomeKeyNonce(s, welcomeSecret)
	if err != nil {
		return nil, fmt.Errorf("seal welcome: %w", err)
	}
	egi, err := s.Seal(key, nonce, nil, giBytes)
	if err != nil {
		return nil, fmt.Errorf("seal welcome: %w", err)
	}
	w := &message.Welcome{CipherSuite: s.ID(), EncryptedGroupInfo: egi, Secrets: []message.EncryptedGroupSecrets{}}
	for i, r := range recipients {
		gs := &message.GroupSecrets{JoinerSecret: joinerSecret, PSKs: psks}
		if r.PathSecret != nil {
			gs.PathSecret = &message.PathSecret{Secret: r.PathSecret}
		}
		pt, err := codec.Marshal(gs)
		if err != nil {
			return nil, fmt.Errorf("seal welcome: recipient %d: %w", i, err)
		}
		ref, err := r.KeyPackage.Ref(s)
		if err != nil {
			return nil, fmt.Errorf("seal welcome: recipient %d: %w", i, err)
		}
		kem, ct, err := s.EncryptWithLabel(r.KeyPackage.InitKey, encryptLabel, egi, pt)
		if err != nil {
			return nil, fmt.Errorf("seal welcome: recipient %d: %w", i, err)
		}
		w.Secrets = append(w.Secrets, message.EncryptedGroupSecrets{
			NewMember: ref, EncryptedGroupSecrets: message.HPKECiphertext{KEMOutput: kem, Ciphertext: ct},
		})
	}
	return w, nil
}

// OpenSecrets finds the entry of w for kp and decrypts its GroupSecrets
// with the init private key.
func OpenSecrets(s *ciphersuite.Suite, w *message.Welcome, kp *message.KeyPackage, initPriv []byte) (*message.GroupSecrets, error) {
	if w == nil || kp == nil {
		return nil, ErrNotForMe
	}
	if w.CipherSuite != s.ID() || kp.CipherSuite != s.ID() {
		return nil, fmt.Errorf("%w: suites %#04x and %#04x, expected %#04x", ErrNotForMe, uint16(w.CipherSuite), uint16(kp.CipherSuite), uint16(s.ID()))
	}
	ref, err := kp.Ref(s)
	if err != nil {
		return nil, fmt.Errorf("open welcome: %w", err)
	}
	egs, ok := w.Find(ref)
	if !ok {
		return nil, ErrNotForMe
	}
	ct := egs.EncryptedGroupSecrets
	pt, err := s.DecryptWithLabel(initPriv, encryptLabel, w.EncryptedGroupInfo, ct.KEMOutput, ct.Ciphertext)
	if err != nil {
		return nil, fmt.Errorf("%w: group secrets: %v", ErrDecrypt, err)
	}
	var gs message.GroupSecrets
	if err := codec.Unmarshal(pt, &gs); err != nil {
		return nil, fmt.Errorf("%w: group secrets: %w", ErrDecrypt, err)
	}
	return &gs, nil
}

// OpenGroupInfo decrypts the GroupInfo of w with the welcome secret derived
// from joinerSecret and pskSecret (nil for no PSKs). The GroupInfo's byte
// slices are views of its own plaintext, which nothing else holds.
func OpenGroupInfo(s *ciphersuite.Suite, w *message.Welcome, joinerSecret, pskSecret []byte) (*message.GroupInfo, error) {
	o, err := Open(s, w, joinerSecret, pskSecret)
	if err != nil {
		return nil, err
	}
	return o.GroupInfo, nil
}

// Opened is a decrypted GroupInfo with the SignContent its signature
// covers, a slice of the same plaintext.
type Opened struct {
	GroupInfo *message.GroupInfo
	signed    []byte
}

// Open is OpenGroupInfo keeping the GroupInfo's SignContent: the
// plaintext is decrypted after room for the SignContent's header, so that
// verifying the signature ([VerifyOpened]) needs no second encoding of the
// GroupInfo and its tree. The GroupInfo's byte slices are views of that
// plaintext (one copy of the group's tree, not one per field), which
// nothing changes afterwards.
func Open(s *ciphersuite.Suite, w *message.Welcome, joinerSecret, pskSecret []byte) (*Opened, error) {
	if w == nil {
		return nil, fmt.Errorf("%w: no welcome", ErrDecrypt)
	}
	if pskSecret == nil {
		pskSecret = make([]byte, s.HashSize())
	}
	if len(joinerSecret) != s.HashSize() || len(pskSecret) != s.HashSize() {
		return nil, fmt.Errorf("%w: secrets of the wrong size", ErrDecrypt)
	}
	member := s.Extract(joinerSecret, pskSecret)
	welcomeSecret, err := s.DeriveSecret(member, "welcome")
	clear(member)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecrypt, err)
	}
	key, nonce, err := keyschedule.WelcomeKeyNonce(s, welcomeSecret)
	clear(welcomeSecret)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecrypt, err)
	}
	const room = message.GroupInfoHeadroom
	buf := make([]byte, room, room+len(w.EncryptedGroupInfo))
	buf, err = s.OpenAppend(buf, key, nonce, nil, w.EncryptedGroupInfo)
	if err != nil {
		return nil, fmt.Errorf("%w: group info: %v", ErrDecrypt, err)
	}
	var gi message.GroupInfo
	if err := codec.UnmarshalView(buf[room:], &gi); err != nil {
		return nil, fmt.Errorf("%w: group info: %w", ErrDecrypt, err)
	}
	signed, err := message.GroupInfoSignContent(buf, room, &gi)
	if err != nil {
		return nil, fmt.Errorf("%w: group info: %w", ErrDecrypt, err)
	}
	return &Opened{GroupInfo: &gi, signed: signed}, nil
}

// VerifyOpened is VerifyGroupInfo for an opened GroupInfo, whose signature
// it checks over the SignContent as received.
func VerifyOpened(s *ciphersuite.Suite, o *Opened, signerKey, joinerSecret, pskSecret []byte) (*keyschedule.Epoch, error) {
	if o == nil || o.GroupInfo == nil {
		return nil, fmt.Errorf("%w: no group info", ErrInvalid)
	}
	return verify(s, o.GroupInfo, o.signed, signerKey, joinerSecret, pskSecret)
}

// VerifyGroupInfo checks gi's signature under the signer's key and, after
// running the key schedule from joinerSecret and pskSecret over gi's group
// context, its confirmation tag (§12.4.3.1). It returns the epoch's secrets.
func VerifyGroupInfo(s *ciphersuite.Suite, gi *message.GroupInfo, signerKey, joinerSecret, pskSecret []byte) (*keyschedule.Epoch, error) {
	if gi == nil {
		return nil, fmt.Errorf("%w: no group info", ErrInvalid)
	}
	return verify(s, gi, nil, signerKey, joinerSecret, pskSecret)
}

// verify is VerifyGroupInfo, over signed when it is set (the SignContent
// of gi as received), else over gi encoded again.
func verify(s *ciphersuite.Suite, gi *message.GroupInfo, signed, signerKey, joinerSecret, pskSecret []byte) (*keyschedule.Epoch, error) {
	if gi.GroupContext.CipherSuite != s.ID() {
		return nil, fmt.Errorf("%w: group suite %#04x", ErrInvalid, uint16(gi.GroupContext.CipherSuite))
	}
	var err error
	if signed != nil {
		err = gi.VerifySignContent(s, signerKey, signed)
	} else {
		err = gi.Verify(s, signerKey)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	gc, err := codec.Marshal(&gi.GroupContext)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	e, err := keyschedule.FromJoiner(s, joinerSecret, pskSecret, gc)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if !keyschedule.VerifyConfirmationTag(s, e.ConfirmationKey, gi.GroupContext.ConfirmedTranscriptHash, gi.ConfirmationTag) {
		return nil, fmt.Errorf("%w: confirmation tag", ErrInvalid)
	}
	return e, nil
}
