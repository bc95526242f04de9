package commitlog

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

func sampleEntry(k Keys, seq uint64) *contentspb.PlaintextCommitLogEntry {
	return &contentspb.PlaintextCommitLogEntry{GroupId: k.GroupID, CommitSequenceId: seq, CommitResult: 1,
		LastEpochAuthenticator: []byte{byte(seq)}, AppliedEpochNumber: seq, AppliedEpochAuthenticator: []byte{byte(seq + 1)}}
}

func originator(k Keys, seq uint64, s *backendpb.SealedCommitLogEntry) *backendpb.OriginatorEnvelope {
	return &backendpb.OriginatorEnvelope{SequenceId: seq, Envelope: Envelope(k, s)}
}

// resealWith encrypts and publish-signs an arbitrary plaintext under k.
func resealWith(t *testing.T, k Keys, pt []byte) *backendpb.SealedCommitLogEntry {
	t.Helper()
	s, err := SealSigned(k, &contentspb.PlaintextCommitLogEntry{})
	if err != nil {
		t.Fatal(err)
	}
	nonce := Nonce(k, pt)
	aead := mustAEAD(t, k)
	s.Nonce, s.Ciphertext = nonce, aead.Seal(nil, nonce, pt, k.Topic)
	s.Signature, _ = k.SigningKey.Sign(nil, EncodeTBS(k.Topic, s.Nonce, s.Ciphertext), publishOptions)
	return s
}

// FORK-077: each failed check discards the envelope with its own reason;
// FORK-076: an entry whose author signature fails is discarded.
func TestFORK077_EachCheckDiscardsWithItsReason(t *testing.T) {
	k := testKeys(t, 1)
	other := testKeys(t, 2)
	_, author, _ := ed25519.GenerateKey(nil)
	good := func() *backendpb.SealedCommitLogEntry {
		s, err := Seal(k, sampleEntry(k, 5), author)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	cases := []struct {
		name string
		env  func() *backendpb.OriginatorEnvelope
		want Reason
	}{
		{"not a commit-log payload", func() *backendpb.OriginatorEnvelope {
			return &backendpb.OriginatorEnvelope{SequenceId: 9, Envelope: &backendpb.ClientEnvelope{TargetTopic: k.Topic,
				Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: []byte{1}}}}
		}, ReasonMalformed},
		{"sealed under another conversation's keys", func() *backendpb.OriginatorEnvelope {
			s, _ := Seal(other, sampleEntry(k, 5), author)
			env := originator(k, 9, s)
			return env
		}, ReasonCommitLogID},
		{"commit_log_id swapped but signed by another key", func() *backendpb.OriginatorEnvelope {
			s, _ := Seal(other, sampleEntry(k, 5), author)
			s.CommitLogId = k.CommitLogID
			return originator(k, 9, s)
		}, ReasonPublishSignature},
		{"publish signature corrupted", func() *backendpb.OriginatorEnvelope {
			s := good()
			s.Signature[3] ^= 1
			return originator(k, 9, s)
		}, ReasonPublishSignature},
		{"ciphertext under another encryption key", func() *backendpb.OriginatorEnvelope {
			s, _ := Seal(other, sampleEntry(k, 5), author)
			s.CommitLogId = k.CommitLogID
			s.Signature, _ = k.SigningKey.Sign(nil, EncodeTBS(k.Topic, s.Nonce, s.Ciphertext), publishOptions)
			return originator(k, 9, s)
		}, ReasonDecrypt},
		{"plaintext is not an entry", func() *backendpb.OriginatorEnvelope {
			return originator(k, 9, resealWith(t, k, []byte{0xff, 0xff}))
		}, ReasonPlaintext},
		{"another group id", func() *backendpb.OriginatorEnvelope {
			e := sampleEntry(k, 5)
			e.GroupId = other.GroupID
			s, _ := Seal(k, e, author)
			return originator(k, 9, s)
		}, ReasonGroupID},
		{"commit sequence id 0", func() *backendpb.OriginatorEnvelope {
			s, _ := Seal(k, sampleEntry(k, 0), author)
			return originator(k, 9, s)
		}, ReasonSequence},
		{"commit at its own sequence id", func() *backendpb.OriginatorEnvelope {
			s, _ := Seal(k, sampleEntry(k, 9), author)
			return originator(k, 9, s)
		}, ReasonSequence},
		{"commit after its own sequence id", func() *backendpb.OriginatorEnvelope {
			s, _ := Seal(k, sampleEntry(k, 12), author)
			return originator(k, 9, s)
		}, ReasonSequence},
		{"bad author signature", func() *backendpb.OriginatorEnvelope {
			e := sampleEntry(k, 5)
			_ = SignAuthor(k, e, author)
			e.AuthorSignature[0] ^= 1
			s, _ := SealSigned(k, e)
			return originator(k, 9, s)
		}, ReasonAuthorSignature},
		{"author signature missing", func() *backendpb.OriginatorEnvelope {
			e := sampleEntry(k, 5)
			e.AuthorInstallationKey = author.Public().(ed25519.PublicKey)
			s, _ := SealSigned(k, e)
			return originator(k, 9, s)
		}, ReasonAuthorSignature},
		{"author signature over another topic", func() *backendpb.OriginatorEnvelope {
			e := sampleEntry(k, 5)
			_ = SignAuthor(other, e, author)
			s, _ := SealSigned(k, e)
			return originator(k, 9, s)
		}, ReasonAuthorSignature},
		{"author signature is pure Ed25519, not Ed25519ph", func() *backendpb.OriginatorEnvelope {
			e := sampleEntry(k, 5)
			e.AuthorInstallationKey = author.Public().(ed25519.PublicKey)
			e.AuthorSignature = ed25519.Sign(author, append(append([]byte{}, k.Topic...), EncodeEntry(e)...))
			s, _ := SealSigned(k, e)
			return originator(k, 9, s)
		}, ReasonAuthorSignature},
		{"author key not 32 bytes", func() *backendpb.OriginatorEnvelope {
			e := sampleEntry(k, 5)
			_ = SignAuthor(k, e, author)
			e.AuthorInstallationKey = e.AuthorInstallationKey[:31]
			s, _ := SealSigned(k, e)
			return originator(k, 9, s)
		}, ReasonAuthorSignature},
	}
	for _, c := range cases {
		for _, v := range []Verifier{SingleVerifier{}, NewBatchVerifier()} {
			o := prepare(k, k.GroupID, c.env())
			r := o.verdict(pad(v.VerifyAll(o.checks)))
			if r == nil || r.Reason != c.want {
				t.Errorf("%s (%T): got %v, want %s", c.name, v, r, c.want)
			}
			if r != nil && !errors.Is(r, ErrRejected) {
				t.Errorf("%s: error does not wrap ErrRejected", c.name)
			}
		}
	}
	if _, err := Open(k, k.GroupID, originator(k, 9, good())); err != nil {
		t.Fatalf("good entry rejected: %v", err)
	}
}

func pad(ok []bool) []bool { return append(ok, make([]bool, 2)...)[:max(2, len(ok))] }

// FORK-076: a published entry carries the author's key and an Ed25519ph
// signature with context "XMTP commit-log author v1" over topic ||
// encoding with author_signature empty.
func TestFORK076_AuthorSignatureIsEd25519phOverTopicAndEntry(t *testing.T) {
	k := testKeys(t, 3)
	pub, author, _ := ed25519.GenerateKey(nil)
	s, _ := Seal(k, sampleEntry(k, 4), author)
	e, err := Open(k, k.GroupID, originator(k, 10, s))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(e.AuthorInstallationKey, pub) || len(e.AuthorSignature) != 64 {
		t.Fatal("author key or signature size wrong")
	}
	unsigned := proto.Clone(e).(*contentspb.PlaintextCommitLogEntry)
	unsigned.AuthorSignature = nil
	digest := sha512Sum(append(append([]byte{}, k.Topic...), EncodeEntry(unsigned)...))
	if ed25519.VerifyWithOptions(pub, digest, e.AuthorSignature, &ed25519.Options{Hash: 7 /* crypto.SHA512 */, Context: "XMTP commit-log author v1"}) != nil {
		t.Fatal("author signature is not Ed25519ph with the author context")
	}
}
