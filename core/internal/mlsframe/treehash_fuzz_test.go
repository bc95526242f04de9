package mlsframe

import (
	"bytes"
	"testing"
)

// FuzzPeekGroupInfoTreeHash feeds arbitrary bytes to the reader of a
// GroupInfo's group id, epoch and tree hash, which a witness applies to
// the GroupInfo a committer published (COMP-438): it never panics, reads
// within its input, and agrees with PeekGroupInfo on group id and epoch.
func FuzzPeekGroupInfoTreeHash(f *testing.F) {
	gi := []byte{0, 1, 0, 4, 0, 1, 0, 1, 2, 0xaa, 0xbb, 0, 0, 0, 0, 0, 0, 0, 7, 3, 1, 2, 3}
	f.Add(gi)
	f.Add(gi[:len(gi)-1])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, epoch, th, ok := PeekGroupInfoTreeHash(b)
		if !ok {
			return
		}
		id2, epoch2, ok2 := PeekGroupInfo(b)
		if !ok2 || !bytes.Equal(id, id2) || epoch != epoch2 {
			t.Fatalf("PeekGroupInfoTreeHash %x %d, PeekGroupInfo %x %d %v", id, epoch, id2, epoch2, ok2)
		}
		if len(th) > len(b) {
			t.Fatalf("tree hash of %d bytes from %d", len(th), len(b))
		}
	})
}

// TestPeekGroupInfoTreeHash reads the tree hash of a GroupInfo's group
// context and refuses a truncated one.
func TestPeekGroupInfoTreeHash(t *testing.T) {
	gi := []byte{0, 1, 0, 4, 0, 1, 0, 1, 2, 0xaa, 0xbb, 0, 0, 0, 0, 0, 0, 0, 7, 3, 1, 2, 3}
	id, epoch, th, ok := PeekGroupInfoTreeHash(gi)
	if !ok || !bytes.Equal(id, []byte{0xaa, 0xbb}) || epoch != 7 || !bytes.Equal(th, []byte{1, 2, 3}) {
		t.Fatalf("got %x %d %x %v", id, epoch, th, ok)
	}
	if _, _, _, ok := PeekGroupInfoTreeHash(gi[:len(gi)-1]); ok {
		t.Fatal("a truncated tree hash read as whole")
	}
}
