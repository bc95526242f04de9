package commitlog

import (
	"errors"
	"fmt"
)

// Error classes. Every failure the package reports wraps exactly one.
var (
	// ErrNoCommitLog reports a conversation without a commit log: no group
	// root, a 16-byte group id, or a kind of group that keeps no log.
	ErrNoCommitLog = errors.New("conversation has no commit log")
	// ErrDisabled reports a call that needs commit_log_enabled (CONF-045).
	ErrDisabled = errors.New("commit log disabled")
	// ErrRejected reports a remote envelope discarded by verification or
	// admission; the error is a [*RejectError] naming the [Reason].
	ErrRejected = errors.New("commit-log entry rejected")
	// ErrNotRecordable reports a processing failure that is not a commit
	// outcome (a storage or engine failure, not a property of the commit).
	ErrNotRecordable = errors.New("failure is not a commit outcome")
	// ErrPublish reports a publication that did not confirm every entry;
	// the unconfirmed ones are retried first on the next pass.
	ErrPublish = errors.New("commit-log publish incomplete")
	// ErrBadKey reports an installation key that does not match this
	// installation's leaf.
	ErrBadKey = errors.New("installation key does not match own leaf")
)

// Reason names why a remote envelope was discarded; it is the key of the
// counters [Log.Counters] returns.
type Reason string

// Discard reasons, in the order verification tests them (FORK-077), then
// the admission and chain reasons (FORK-087, FORK-088, FORK-083) and the
// sequence-id reasons of COMP-099 and COMP-101.
const (
	ReasonMalformed        Reason = "malformed"         // not a decodable sealed entry on this topic
	ReasonCommitLogID      Reason = "commit_log_id"     // commit_log_id is not the conversation's
	ReasonPublishSignature Reason = "publish_signature" // API-300 signature fails under the commit-log id
	ReasonDecrypt          Reason = "decrypt"           // ciphertext does not open under the encryption key
	ReasonPlaintext        Reason = "plaintext"         // decrypted bytes are not a PlaintextCommitLogEntry
	ReasonGroupID          Reason = "group_id"          // entry names another group
	ReasonSequence         Reason = "sequence"          // commit_sequence_id is 0 or not below the envelope's
	ReasonOutOfRange       Reason = "out_of_range"      // a value no store holds, or an oversized authenticator (COMP-101)
	ReasonAuthorSignature  Reason = "author_signature"  // author key not 32 bytes or Ed25519ph signature fails
	ReasonReplay           Reason = "replay"            // envelope at or below the read position
	ReasonAhead            Reason = "ahead"             // sequence id above what the topics have shown (COMP-099)
	ReasonBelowFloor       Reason = "below_floor"       // applied epoch below the legacy reader floor
	ReasonNotPublisher     Reason = "not_publisher"     // author is not a publisher in the reader's tree
	ReasonChain            Reason = "chain"             // breaks the chain table of FORK-083
)

// RejectError is the error for a discarded remote envelope.
type RejectError struct {
	Reason Reason
	// EnvelopeSequenceID is the envelope's sequence id on the topic.
	EnvelopeSequenceID uint64
	Detail             string
}

// Error names the envelope, the reason and the detail.
func (e *RejectError) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("commit-log envelope %d rejected: %s", e.EnvelopeSequenceID, e.Reason)
	}
	return fmt.Sprintf("commit-log envelope %d rejected: %s: %s", e.EnvelopeSequenceID, e.Reason, e.Detail)
}

// Unwrap returns [ErrRejected].
func (e *RejectError) Unwrap() error { return ErrRejected }

func reject(seq uint64, r Reason, format string, args ...any) *RejectError {
	return &RejectError{Reason: r, EnvelopeSequenceID: seq, Detail: fmt.Sprintf(format, args...)}
}
