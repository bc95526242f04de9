package commitlog

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"fmt"

	"golang.org/x/crypto/chacha20poly1305"
	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// Signature contexts (companion definitions: publish signature, author
// signature).
const (
	// PublishContext is the Ed25519ctx context of the publish signature.
	PublishContext = ports.PublishContext
	// AuthorContext is the Ed25519ph context of the author signature.
	AuthorContext = "XMTP commit-log author v1"
)

var (
	publishOptions = &ed25519.Options{Context: PublishContext}
	authorOptions  = &ed25519.Options{Hash: crypto.SHA512, Context: AuthorContext}
)

// Nonce returns the deterministic nonce of FORK-074: the first 12 bytes of
// HMAC-SHA256(nonce key, topic || canonical encoding).
func Nonce(k Keys, encoded []byte) []byte {
	m := hmac.New(sha256.New, k.NonceKey)
	m.Write(k.Topic)
	m.Write(encoded)
	return m.Sum(nil)[:chacha20poly1305.NonceSize]
}

// authorDigest is the SHA-512 prehash the Ed25519ph author signature signs:
// topic || canonical encoding of the entry with author_signature empty.
func authorDigest(topic []byte, e *contentspb.PlaintextCommitLogEntry) []byte {
	h := sha512.New()
	h.Write(topic)
	h.Write(encodeEntry(e, false))
	return h.Sum(nil)
}

// SignAuthor sets e's author_installation_key to author's public key and
// its author_signature to the Ed25519ph signature of FORK-076.
func SignAuthor(k Keys, e *contentspb.PlaintextCommitLogEntry, author ed25519.PrivateKey) error {
	e.AuthorInstallationKey = []byte(author.Public().(ed25519.PublicKey))
	sig, err := author.Sign(nil, authorDigest(k.Topic, e), authorOptions)
	if err != nil {
		return fmt.Errorf("author signature: %w", err)
	}
	e.AuthorSignature = sig
	return nil
}

// Seal signs e as author (FORK-076) and seals it (FORK-074). Sealing the
// same entry under the same keys twice yields identical bytes.
func Seal(k Keys, e *contentspb.PlaintextCommitLogEntry, author ed25519.PrivateKey) (*backendpb.SealedCommitLogEntry, error) {
	signed := proto.Clone(e).(*contentspb.PlaintextCommitLogEntry)
	if err := SignAuthor(k, signed, author); err != nil {
		return nil, err
	}
	return SealSigned(k, signed)
}

// SealSigned seals an entry whose author fields are already set.
func SealSigned(k Keys, e *contentspb.PlaintextCommitLogEntry) (*backendpb.SealedCommitLogEntry, error) {
	encoded := EncodeEntry(e)
	nonce := Nonce(k, encoded)
	aead, err := chacha20poly1305.New(k.EncryptionKey)
	if err != nil {
		return nil, fmt.Errorf("commit-log aead: %w", err)
	}
	ct := aead.Seal(nil, nonce, encoded, k.Topic)
	sig, err := k.SigningKey.Sign(nil, EncodeTBS(k.Topic, nonce, ct), publishOptions)
	if err != nil {
		return nil, fmt.Errorf("publish signature: %w", err)
	}
	return &backendpb.SealedCommitLogEntry{
		CommitLogId: bytes.Clone(k.CommitLogID),
		Nonce:       nonce,
		Ciphertext:  ct,
		Signature:   sig,
	}, nil
}

// Envelope wraps a sealed entry in the ClientEnvelope that publishes it.
func Envelope(k Keys, s *backendpb.SealedCommitLogEntry) *backendpb.ClientEnvelope {
	return &backendpb.ClientEnvelope{
		TargetTopic: bytes.Clone(k.Topic),
		Payload:     &backendpb.ClientEnvelope_SealedCommitLogEntry{SealedCommitLogEntry: s},
	}
}

// VerifyPublishSignature reports whether s carries a valid publish
// signature (API-300) under its own commit_log_id for the topic that id
// names. It is the check a delivery service applies on admission.
func VerifyPublishSignature(s *backendpb.SealedCommitLogEntry) bool {
	id := s.GetCommitLogId()
	if len(id) != ed25519.PublicKeySize {
		return false
	}
	tbs := EncodeTBS(Topic(id), s.GetNonce(), s.GetCiphertext())
	return ed25519.VerifyWithOptions(ed25519.PublicKey(id), tbs, s.GetSignature(), publishOptions) == nil
}
