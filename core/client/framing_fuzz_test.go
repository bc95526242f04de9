package client

import (
	"encoding/binary"
	"testing"
)

// FuzzPeekHeader reads the clear header of whatever a group topic serves:
// it never panics, and a header it accepts names MLS 1.0, one of the two
// framings and, read independently from the same bytes, the epoch of a
// framing whose group id is short enough to read here. The corpus in
// testdata/fuzz holds commits, application messages and proposals the
// engine produced.
func FuzzPeekHeader(f *testing.F) {
	f.Add([]byte{0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0})
	f.Add([]byte{0, 1, 0, 2, 1, 0xaa, 0, 0, 0, 0, 0, 0, 0, 7, 1})
	f.Add([]byte{0, 1, 0, 3})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, ok := peekHeader(b)
		if !ok {
			return
		}
		if len(b) < 4 || binary.BigEndian.Uint16(b) != 1 {
			t.Fatalf("accepted a message that is not MLS 1.0: %x", b)
		}
		if wf := binary.BigEndian.Uint16(b[2:]); wf != h.wireFormat || (wf != wirePublicMessage && wf != wirePrivateMessage) {
			t.Fatalf("wire format %d read as %d", wf, h.wireFormat)
		}
		// A one-byte vector length below 64 is the group id's length.
		if len(b) > 4 && b[4] < 64 && len(b) >= 5+int(b[4])+8 {
			if e := binary.BigEndian.Uint64(b[5+int(b[4]):]); e != h.epoch {
				t.Fatalf("epoch %d read as %d", e, h.epoch)
			}
		}
	})
}
