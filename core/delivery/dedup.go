package delivery

import (
	"crypto/sha256"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// dedupKey returns the key under which the store keeps an envelope once
// on its topic, so that a replay is answered with the stored envelope's
// sequence id and stores nothing:
//
//   - a sealed commit-log entry (COMP-144): SHA-256 of the
//     CommitLogEntryTBS its publish signature covers (topic, nonce,
//     ciphertext), so a replay of an entry, whatever else differs in its
//     encoding, is the same entry;
//   - an identity update (COMP-324): SHA-256 of its deterministic
//     encoding; the recovery signature covers every field that matters, so
//     equal updates are the same statement and readers apply it once;
//   - a key package (COMP-324): SHA-256 of its TLS serialization, so an
//     old package published again keeps its old id and never becomes the
//     newest one served.
//
// Group messages and Welcomes have none: their payloads are opaque to the
// service, and a repeat is the sender's to make (COMP-324).
func dedupKey(kind ports.TopicKind, env *backendpb.ClientEnvelope) []byte {
	var b []byte
	switch kind {
	case ports.TopicCommitLog:
		e := env.GetSealedCommitLogEntry()
		tbs, err := PublishTBS(env.GetTargetTopic(), e.GetNonce(), e.GetCiphertext())
		if err != nil {
			return nil // admission already verified a signature over these bytes
		}
		b = tbs
	case ports.TopicIdentityUpdates:
		raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(env.GetIdentityUpdate())
		if err != nil {
			return nil
		}
		b = append([]byte("identity-update:"), raw...)
	case ports.TopicKeyPackages:
		b = append([]byte("key-package:"), env.GetKeyPackage().GetKeyPackageTlsSerialized()...)
	default:
		return nil
	}
	sum := sha256.Sum256(b)
	return sum[:]
}
