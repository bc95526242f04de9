package commitlog

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// EncodeEntry returns the canonical encoding of FORK-074: each field of the
// PlaintextCommitLogEntry whose value is not the default, once, in
// ascending field-number order, and no other bytes (unknown fields are not
// written).
func EncodeEntry(e *contentspb.PlaintextCommitLogEntry) []byte { return encodeEntry(e, true) }

// encodeEntry is [EncodeEntry], leaving out author_signature when
// withSignature is false (the bytes the author signature covers).
func encodeEntry(e *contentspb.PlaintextCommitLogEntry, withSignature bool) []byte {
	b := make([]byte, 0, 64+len(e.GetGroupId())+len(e.GetLastEpochAuthenticator())+
		len(e.GetAppliedEpochAuthenticator())+len(e.GetAuthorInstallationKey())+len(e.GetAuthorSignature()))
	b = appendBytes(b, 1, e.GetGroupId())
	b = appendUint(b, 2, e.GetCommitSequenceId())
	b = appendBytes(b, 3, e.GetLastEpochAuthenticator())
	b = appendUint(b, 4, uint64(int64(e.GetCommitResult())))
	b = appendUint(b, 5, e.GetAppliedEpochNumber())
	b = appendBytes(b, 6, e.GetAppliedEpochAuthenticator())
	b = appendBytes(b, 7, e.GetAuthorInstallationKey())
	if withSignature {
		b = appendBytes(b, 8, e.GetAuthorSignature())
	}
	return b
}

// EncodeTBS returns the canonical encoding of CommitLogEntryTBS{topic,
// nonce, ciphertext}, the bytes the publish signature covers.
func EncodeTBS(topic, nonce, ciphertext []byte) []byte {
	b := make([]byte, 0, 12+len(topic)+len(nonce)+len(ciphertext))
	b = appendBytes(b, 1, topic)
	b = appendBytes(b, 2, nonce)
	b = appendBytes(b, 3, ciphertext)
	return b
}

// EncodeTBSMessage is [EncodeTBS] for a message value.
func EncodeTBSMessage(m *backendpb.CommitLogEntryTBS) []byte {
	return EncodeTBS(m.GetTopic(), m.GetNonce(), m.GetCiphertext())
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendUint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}
