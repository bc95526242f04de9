package mls

import (
	"bytes"
	"testing"
	"time"
)

// FuzzDecodeStaged feeds arbitrary bytes to the decoder of staged-Welcome
// blobs, in parts and in one blob: it never panics, and what it accepts
// encodes back to the same bytes (a version-2 group state is passed
// through whole).
func FuzzDecodeStaged(f *testing.F) {
	b, _ := encodeStaged(stagedBlob{tag: bytes.Repeat([]byte{7}, 16), at: time.Unix(1700000000, 5), signer: 3, head: []byte("head"),
		blocks: map[uint64][]byte{15: []byte("block 15"), 511: []byte("block 511")}})
	f.Add(b)
	b, _ = encodeStaged(stagedBlob{at: time.Unix(1700000000, 5), signer: 3, state: []byte("state")})
	f.Add(b)
	f.Add([]byte{2, 0, 3})
	f.Add([]byte{welcomeVersion})
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := decodeStaged(in)
		if err != nil {
			return
		}
		if len(in) > 0 && in[0] == 2 {
			if !bytes.Equal(s.state, in) {
				t.Fatal("a version-2 state was not passed through whole")
			}
			return
		}
		out, err := encodeStaged(s)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, in) {
			t.Fatalf("decoded %x, encoded back %x", in, out)
		}
	})
}

// FuzzDecodeRemoval feeds arbitrary bytes to the removal-record decoder:
// it never panics, and what it accepts holds the fields it was written
// with.
func FuzzDecodeRemoval(f *testing.F) {
	f.Add([]byte{removalVersion, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 1, 0xaa})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := decodeRemoval(in)
		if err != nil {
			return
		}
		if len(in) < 14 || in[0] != removalVersion || !bytes.Equal(in[len(in)-len(r.TreeHash):], r.TreeHash) {
			t.Fatalf("accepted %x as %+v", in, r)
		}
	})
}
