package commitlog

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

func testKeys(t testing.TB, seed byte) Keys {
	t.Helper()
	k, err := DeriveKeys(bytes.Repeat([]byte{seed}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func randBytes(r *rand.Rand, max int) []byte {
	n := r.IntN(max + 1)
	if n == 0 {
		return nil
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func randUint(r *rand.Rand) uint64 {
	switch r.IntN(4) {
	case 0:
		return 0
	case 1:
		return uint64(r.IntN(200))
	case 2:
		return r.Uint64()
	}
	return uint64(r.Uint32())
}

// FORK-074: the hand-written canonical encoding equals protobuf's
// deterministic output for the same values, for many values, including
// defaults that must not be written.
func TestFORK074_CanonicalEncodingMatchesDeterministicProtobuf(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 5000; i++ {
		e := &contentspb.PlaintextCommitLogEntry{
			GroupId:                   randBytes(r, 40),
			CommitSequenceId:          randUint(r),
			LastEpochAuthenticator:    randBytes(r, 40),
			CommitResult:              contentspb.CommitResult(r.IntN(6)),
			AppliedEpochNumber:        randUint(r),
			AppliedEpochAuthenticator: randBytes(r, 300),
			AuthorInstallationKey:     randBytes(r, 32),
			AuthorSignature:           randBytes(r, 64),
		}
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if got := EncodeEntry(e); !bytes.Equal(got, want) {
			t.Fatalf("entry %d: canonical %x, deterministic %x", i, got, want)
		}
		tbs := &backendpb.CommitLogEntryTBS{Topic: randBytes(r, 33), Nonce: randBytes(r, 12), Ciphertext: randBytes(r, 200)}
		want, _ = proto.MarshalOptions{Deterministic: true}.Marshal(tbs)
		if got := EncodeTBSMessage(tbs); !bytes.Equal(got, want) {
			t.Fatalf("tbs %d: canonical %x, deterministic %x", i, got, want)
		}
	}
	// Unknown fields are not part of the canonical encoding.
	e := &contentspb.PlaintextCommitLogEntry{CommitSequenceId: 5}
	e.ProtoReflect().SetUnknown([]byte{0x48, 0x01})
	if got := EncodeEntry(e); !bytes.Equal(got, []byte{0x10, 0x05}) {
		t.Fatalf("unknown field written: %x", got)
	}
}

// FORK-074: sealing twice gives identical bytes; the nonce is the first 12
// bytes of HMAC-SHA256 over topic || encoding; the ciphertext opens under
// the encryption key with the topic as associated data; the signature
// verifies under the commit-log id as Ed25519ctx.
func TestFORK074_SealIsDeterministicAndFollowsTheKeys(t *testing.T) {
	k := testKeys(t, 1)
	_, author, _ := ed25519.GenerateKey(nil)
	e := &contentspb.PlaintextCommitLogEntry{GroupId: k.GroupID, CommitSequenceId: 7, CommitResult: 1,
		LastEpochAuthenticator: []byte("a"), AppliedEpochNumber: 3, AppliedEpochAuthenticator: []byte("b")}
	s1, err := Seal(k, e, author)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := Seal(k, e, author)
	b1, _ := proto.Marshal(s1)
	b2, _ := proto.Marshal(s2)
	if !bytes.Equal(b1, b2) {
		t.Fatal("sealing twice gave different bytes")
	}
	if !bytes.Equal(s1.CommitLogId, k.CommitLogID) || len(s1.Nonce) != 12 {
		t.Fatal("commit_log_id or nonce size wrong")
	}
	if k.Topic[0] != 0x04 || !bytes.Equal(k.Topic[1:], k.CommitLogID) {
		t.Fatal("topic is not 0x04 || commit_log_id")
	}
	if !VerifyPublishSignature(s1) {
		t.Fatal("publish signature does not verify")
	}
	if ed25519.VerifyWithOptions(ed25519.PublicKey(k.CommitLogID), EncodeTBS(k.Topic, s1.Nonce, s1.Ciphertext), s1.Signature, &ed25519.Options{Context: PublishContext}) != nil {
		t.Fatal("not an Ed25519ctx signature under the commit-log id")
	}
	env := &backendpb.OriginatorEnvelope{SequenceId: 9, Envelope: Envelope(k, s1)}
	got, err := Open(k, k.GroupID, env)
	if err != nil {
		t.Fatal(err)
	}
	signed := proto.Clone(e).(*contentspb.PlaintextCommitLogEntry)
	_ = SignAuthor(k, signed, author)
	if !bytes.Equal(s1.Nonce, Nonce(k, EncodeEntry(signed))) {
		t.Fatal("nonce is not HMAC(topic || encoding)")
	}
	if !proto.Equal(got, signed) {
		t.Fatal("opened entry differs")
	}
	// A different entry gets a different nonce.
	e.CommitSequenceId = 8
	s3, _ := Seal(k, e, author)
	if bytes.Equal(s3.Nonce, s1.Nonce) {
		t.Fatal("nonce repeated for distinct entries")
	}
}

// The key schedule follows the companion definition: HKDF-SHA256, empty
// salt, 32-byte expansions; ids are Ed25519 public keys of the seeds.
func TestDeriveKeysCompanionDefinition(t *testing.T) {
	root := bytes.Repeat([]byte{9}, 32)
	k, _ := DeriveKeys(root)
	// HKDF-Extract with empty salt is HMAC-SHA256 keyed with 32 zero bytes.
	prk := hmacSHA256(make([]byte, 32), root)
	t1 := func(label string) []byte { return hmacSHA256(prk, append([]byte(label), 1)) }
	if !bytes.Equal(k.EncryptionKey, t1(LabelCommitLogEncryptionKey)) || !bytes.Equal(k.NonceKey, t1(LabelCommitLogNonceKey)) {
		t.Fatal("AEAD or nonce key is not the HKDF expansion")
	}
	if !bytes.Equal(k.GroupID, ed25519.NewKeyFromSeed(t1(LabelGroupSigningKey)).Public().(ed25519.PublicKey)) {
		t.Fatal("group id is not the public key of the group-signing seed")
	}
	if !bytes.Equal(k.CommitLogID, ed25519.NewKeyFromSeed(t1(LabelCommitLogSigningKey)).Public().(ed25519.PublicKey)) {
		t.Fatal("commit-log id is not the public key of the commit-log signing seed")
	}
	if _, err := DeriveKeys(root[:16]); !errors.Is(err, ErrNoCommitLog) {
		t.Fatalf("short root: %v", err)
	}
}

func hmacSHA256(key, msg []byte) []byte {
	const block = 64
	k := append([]byte(nil), key...)
	k = append(k, make([]byte, block-len(k))...)
	ipad, opad := make([]byte, block), make([]byte, block)
	for i := range k {
		ipad[i], opad[i] = k[i]^0x36, k[i]^0x5c
	}
	in := sha256.Sum256(append(ipad, msg...))
	out := sha256.Sum256(append(opad, in[:]...))
	return out[:]
}

// FORK-074: the nonce and the ciphertext checked against a computation
// that shares no code with Seal: HMAC-SHA256 written out here, under the
// nonce key, over the topic followed by protobuf's deterministic encoding
// of the signed entry, first 12 bytes; ChaCha20-Poly1305 of that encoding
// under the encryption key with the topic as associated data.
func TestFORK074_NonceAndCiphertextFromAnIndependentComputation(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 4))
	for i := 0; i < 200; i++ {
		k := testKeys(t, byte(i))
		_, author, _ := ed25519.GenerateKey(nil)
		e := &contentspb.PlaintextCommitLogEntry{GroupId: k.GroupID, CommitSequenceId: randUint(r), CommitResult: contentspb.CommitResult(r.IntN(5)),
			LastEpochAuthenticator: randBytes(r, 32), AppliedEpochNumber: randUint(r), AppliedEpochAuthenticator: randBytes(r, 32)}
		s, err := Seal(k, e, author)
		if err != nil {
			t.Fatal(err)
		}
		signed := proto.Clone(e).(*contentspb.PlaintextCommitLogEntry)
		signed.AuthorInstallationKey = author.Public().(ed25519.PublicKey)
		signed.AuthorSignature, _ = author.Sign(nil, sha512Sum(append(bytes.Clone(k.Topic), mustMarshal(t, noSig(signed))...)), authorOptions)
		encoding := mustMarshal(t, signed)
		want := hmacSHA256(k.NonceKey, append(bytes.Clone(k.Topic), encoding...))[:12]
		if !bytes.Equal(s.Nonce, want) {
			t.Fatalf("entry %d: nonce %x, want the first 12 bytes of HMAC(nonce key, topic || entry) %x", i, s.Nonce, want)
		}
		if ct := mustAEAD(t, k).Seal(nil, want, encoding, k.Topic); !bytes.Equal(s.Ciphertext, ct) {
			t.Fatalf("entry %d: ciphertext is not ChaCha20-Poly1305(entry) under the topic", i)
		}
	}
}

func noSig(e *contentspb.PlaintextCommitLogEntry) *contentspb.PlaintextCommitLogEntry {
	c := proto.Clone(e).(*contentspb.PlaintextCommitLogEntry)
	c.AuthorSignature = nil
	return c
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
