package commitlog

import (
	"bytes"
	"crypto/ed25519"

	"golang.org/x/crypto/chacha20poly1305"
	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// opened is a remote envelope after the checks of FORK-077 that need no
// signature, with the two signature checks still to run.
type opened struct {
	seq   uint64
	entry *contentspb.PlaintextCommitLogEntry
	// early is a failure found before any signature check mattered
	// (malformed, commit_log_id); no checks run for it.
	early *RejectError
	// pending is the first non-signature failure after the publish
	// signature in FORK-077's order (decrypt, plaintext, group_id,
	// sequence, author key length).
	pending *RejectError
	checks  []SignatureCheck // [publish] or [publish, author]
}

// prepare runs the non-signature checks of FORK-077 on an envelope read
// from the conversation's commit-log topic.
func prepare(k Keys, groupID []byte, env *backendpb.OriginatorEnvelope) *opened {
	o := &opened{seq: env.GetSequenceId()}
	ce := env.GetEnvelope()
	sealed := ce.GetSealedCommitLogEntry()
	if sealed == nil || !bytes.Equal(ce.GetTargetTopic(), k.Topic) {
		o.early = reject(o.seq, ReasonMalformed, "not a sealed commit-log entry on this topic")
		return o
	}
	if !bytes.Equal(sealed.GetCommitLogId(), k.CommitLogID) {
		o.early = reject(o.seq, ReasonCommitLogID, "commit_log_id %x", sealed.GetCommitLogId())
		return o
	}
	o.checks = append(o.checks, SignatureCheck{
		PublicKey: k.CommitLogID,
		Message:   EncodeTBS(k.Topic, sealed.GetNonce(), sealed.GetCiphertext()),
		Signature: sealed.GetSignature(),
		Options:   publishOptions,
	})
	if len(sealed.GetNonce()) != chacha20poly1305.NonceSize {
		o.pending = reject(o.seq, ReasonDecrypt, "nonce of %d bytes", len(sealed.GetNonce()))
		return o
	}
	aead, err := chacha20poly1305.New(k.EncryptionKey)
	if err != nil {
		o.pending = reject(o.seq, ReasonDecrypt, "%v", err)
		return o
	}
	pt, err := aead.Open(nil, sealed.GetNonce(), sealed.GetCiphertext(), k.Topic)
	if err != nil {
		o.pending = reject(o.seq, ReasonDecrypt, "%v", err)
		return o
	}
	var e contentspb.PlaintextCommitLogEntry
	if err := proto.Unmarshal(pt, &e); err != nil {
		o.pending = reject(o.seq, ReasonPlaintext, "%v", err)
		return o
	}
	o.entry = &e
	if !bytes.Equal(e.GetGroupId(), groupID) {
		o.pending = reject(o.seq, ReasonGroupID, "group_id %x", e.GetGroupId())
		return o
	}
	if cs := e.GetCommitSequenceId(); cs == 0 || cs >= o.seq {
		o.pending = reject(o.seq, ReasonSequence, "commit_sequence_id %d at envelope %d", cs, o.seq)
		return o
	}
	if e.GetCommitSequenceId() > maxStorable || e.GetAppliedEpochNumber() > maxStorable ||
		len(e.GetLastEpochAuthenticator()) > maxAuthenticator || len(e.GetAppliedEpochAuthenticator()) > maxAuthenticator {
		o.pending = reject(o.seq, ReasonOutOfRange, "applied epoch %d, authenticators of %d and %d bytes",
			e.GetAppliedEpochNumber(), len(e.GetLastEpochAuthenticator()), len(e.GetAppliedEpochAuthenticator()))
		return o
	}
	if len(e.GetAuthorInstallationKey()) != ed25519.PublicKeySize {
		o.pending = reject(o.seq, ReasonAuthorSignature, "author key of %d bytes", len(e.GetAuthorInstallationKey()))
		return o
	}
	o.checks = append(o.checks, SignatureCheck{
		PublicKey: e.GetAuthorInstallationKey(),
		Message:   authorDigest(k.Topic, &e),
		Signature: e.GetAuthorSignature(),
		Options:   authorOptions,
	})
	return o
}

// verdict combines the signature results with the other checks, in
// FORK-077's order. ok[i] is the result of o.checks[i].
func (o *opened) verdict(ok []bool) *RejectError {
	switch {
	case o.early != nil:
		return o.early
	case !ok[0]:
		return reject(o.seq, ReasonPublishSignature, "")
	case o.pending != nil:
		return o.pending
	case !ok[1]:
		return reject(o.seq, ReasonAuthorSignature, "")
	}
	return nil
}

// Open verifies and opens one envelope under FORK-077 with single
// signature verification: it returns the decrypted entry, or an error
// wrapping [ErrRejected] (a [*RejectError]) naming the first failed check.
func Open(k Keys, groupID []byte, env *backendpb.OriginatorEnvelope) (*contentspb.PlaintextCommitLogEntry, error) {
	o := prepare(k, groupID, env)
	if r := o.verdict(SingleVerifier{}.VerifyAll(o.checks)); r != nil {
		return nil, r
	}
	return o.entry, nil
}
