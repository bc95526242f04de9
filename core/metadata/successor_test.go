package metadata

import (
	"bytes"
	"errors"
	"testing"
)

// COMP-483: the successor component holds a group id of 16 or 32 bytes;
// its absence is no successor and any other length is malformed.
func TestCOMP483_SuccessorComponent(t *testing.T) {
	var d Dictionary
	if id, ok, err := d.Successor(); id != nil || ok || err != nil {
		t.Fatalf("absent successor: %x, %v, %v", id, ok, err)
	}
	for _, n := range []int{16, 32} {
		want := bytes.Repeat([]byte{9}, n)
		if id, ok, err := d.Set(ComponentSuccessor, want).Successor(); !ok || err != nil || !bytes.Equal(id, want) {
			t.Fatalf("%d-byte successor: %x, %v, %v", n, id, ok, err)
		}
	}
	for _, n := range []int{0, 15, 33} {
		if _, _, err := d.Set(ComponentSuccessor, make([]byte, n)).Successor(); !errors.Is(err, ErrMalformed) {
			t.Fatalf("%d-byte successor: %v, want ErrMalformed", n, err)
		}
	}
}
