package commitlog

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"io"

	"golang.org/x/crypto/hkdf"

	"github.com/regroup-mls/regroup/ports"
)

// Labels of the HKDF-SHA256 expansions of the group root (companion
// definitions, GMOD-040/041).
const (
	LabelGroupSigningKey        = "regroup/v1/group-signing-key"
	LabelCommitLogSigningKey    = "regroup/v1/commit-log-signing-key"
	LabelCommitLogEncryptionKey = "regroup/v1/commit-log-encryption-key"
	LabelCommitLogNonceKey      = "regroup/v1/commit-log-nonce-key"
)

// Keys are the keys of one conversation's commit log, all derived from its
// group root.
type Keys struct {
	// GroupID is the Ed25519 public key of the group-signing seed: the
	// 32-byte group id (JOIN-083).
	GroupID []byte
	// CommitLogID is the Ed25519 public key of the commit-log signing seed;
	// it names the topic and is the only key the publish signature is
	// verified under.
	CommitLogID []byte
	// SigningKey signs every entry's CommitLogEntryTBS (the publish
	// signature).
	SigningKey ed25519.PrivateKey
	// EncryptionKey is the ChaCha20-Poly1305 key of FORK-074.
	EncryptionKey []byte
	// NonceKey is the HMAC-SHA256 key that derives each entry's nonce.
	NonceKey []byte
	// Topic is 0x04 || CommitLogID (TOPIC-001).
	Topic []byte
}

// DeriveKeys derives a conversation's commit-log keys from its 32-byte
// group root: HKDF-SHA256 with an empty salt, expanded to 32 bytes under
// each label. It fails, wrapping [ErrNoCommitLog], when root is not 32
// bytes.
func DeriveKeys(root []byte) (Keys, error) {
	if len(root) != 32 {
		return Keys{}, fmt.Errorf("group root of %d bytes: %w", len(root), ErrNoCommitLog)
	}
	prk := hkdf.Extract(sha256.New, root, nil)
	expand := func(label string) []byte {
		out := make([]byte, 32)
		if _, err := io.ReadFull(hkdf.Expand(sha256.New, prk, []byte(label)), out); err != nil {
			panic("hkdf expand of 32 bytes cannot fail: " + err.Error())
		}
		return out
	}
	groupKey := ed25519.NewKeyFromSeed(expand(LabelGroupSigningKey))
	signing := ed25519.NewKeyFromSeed(expand(LabelCommitLogSigningKey))
	k := Keys{
		GroupID:       []byte(groupKey.Public().(ed25519.PublicKey)),
		CommitLogID:   []byte(signing.Public().(ed25519.PublicKey)),
		SigningKey:    signing,
		EncryptionKey: expand(LabelCommitLogEncryptionKey),
		NonceKey:      expand(LabelCommitLogNonceKey),
	}
	k.Topic = Topic(k.CommitLogID)
	return k, nil
}

// Topic returns the commit-log topic of a commit-log id: 0x04 || id.
func Topic(commitLogID []byte) []byte {
	return append([]byte{byte(ports.TopicCommitLog)}, commitLogID...)
}
