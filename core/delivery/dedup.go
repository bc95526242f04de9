package delivery

import (
	"crypto/sha256"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// dedupKey returns the key under which the store keeps an envelope once
// on its topic (COMP-144): for a sealed commit-log entry, SHA-256 of the
// CommitLogEntryTBS its publish signature covers (topic, nonce,
// ciphertext), so a replay of an entry, whatever else differs in its
// encoding, is the same entry. Other kinds have none.
func dedupKey(kind ports.TopicKind, env *backendpb.ClientEnvelope) []byte {
	if kind != ports.TopicCommitLog {
		return nil
	}
	e := env.GetSealedCommitLogEntry()
	tbs, err := PublishTBS(env.GetTargetTopic(), e.GetNonce(), e.GetCiphertext())
	if err != nil {
		return nil // admission already verified a signature over these bytes
	}
	sum := sha256.Sum256(tbs)
	return sum[:]
}
