package delivery

import "testing"

// FuzzPeekFrame: the frame reader of commit acceptance reads bytes any
// authenticated publisher sends; it never panics, and a frame it accepts
// is a PublicMessage or PrivateMessage.
func FuzzPeekFrame(f *testing.F) {
	f.Add(fakeCommit([]byte("0123456789abcdef"), 3, 0))
	f.Add([]byte{0, 1, 0, 2, 0x40, 1, 9, 0, 0, 0, 0, 0, 0, 0, 9, 1})
	f.Add([]byte{0, 1, 0, 1, 0x80, 0, 0, 1})
	f.Add(fakeGroupInfo([]byte("0123456789abcdef"), 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, ok := peekFrame(b)
		if ok && fr.wireFormat != wirePublicMessage && fr.wireFormat != wirePrivateMessage {
			t.Fatalf("accepted wire format %d", fr.wireFormat)
		}
		_ = isGroupInfo(b)
	})
}
