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

// FuzzOpen feeds arbitrary bytes as a stored envelope to verification and
// opening: it must never panic, must fail only with a *RejectError, and an
// entry it accepts satisfies every check of FORK-077.
func FuzzOpen(f *testing.F) {
	k := testKeys(f, 1)
	_, author, _ := ed25519.GenerateKey(bytes.NewReader(bytes.Repeat([]byte{4}, 64)))
	for _, cs := range []uint64{1, 5, 40} {
		s, err := Seal(k, sampleEntry(k, cs), author)
		if err != nil {
			f.Fatal(err)
		}
		b, _ := proto.Marshal(&backendpb.OriginatorEnvelope{SequenceId: 41, Envelope: Envelope(k, s)})
		f.Add(b)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var env backendpb.OriginatorEnvelope
		if err := proto.Unmarshal(data, &env); err != nil {
			return
		}
		e, err := Open(k, k.GroupID, &env)
		if err != nil {
			var re *RejectError
			if !errors.As(err, &re) || !errors.Is(err, ErrRejected) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if !bytes.Equal(e.GroupId, k.GroupID) || e.CommitSequenceId == 0 || e.CommitSequenceId >= env.GetSequenceId() ||
			len(e.AuthorInstallationKey) != ed25519.PublicKeySize {
			t.Fatalf("accepted an entry that breaks FORK-077: %v", e)
		}
	})
}

// FuzzEntryEncoding checks the canonical encoder against protobuf's
// deterministic output for every decodable PlaintextCommitLogEntry.
func FuzzEntryEncoding(f *testing.F) {
	f.Add(EncodeEntry(sampleEntry(testKeys(f, 1), 3)))
	f.Add([]byte{0x10, 0x05, 0x20, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		var e contentspb.PlaintextCommitLogEntry
		if err := proto.Unmarshal(data, &e); err != nil {
			return
		}
		e.ProtoReflect().SetUnknown(nil)
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(&e)
		if err != nil {
			t.Fatal(err)
		}
		if got := EncodeEntry(&e); !bytes.Equal(got, want) {
			t.Fatalf("canonical %x, deterministic %x", got, want)
		}
	})
}
