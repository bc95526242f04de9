package codec_test

import (
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
)

// A view Reader's Opaque and Raw alias the input, capped at their length
// (appending never writes into the input); an empty vector is an empty,
// non-nil slice as with a copying Reader; a plain Reader still copies.
func TestViewReaderAliasesTheInput(t *testing.T) {
	w := codec.NewWriter(32)
	w.Opaque([]byte("abc"))
	w.Opaque(nil)
	w.Raw([]byte("xy"))
	w.Uint8(9)
	in, _ := w.Bytes()
	r := codec.NewViewReader(in)
	v, empty, raw := r.Opaque(), r.Opaque(), r.Raw(2)
	if string(v) != "abc" || &v[0] != &in[1] || cap(v) != 3 {
		t.Fatalf("opaque %q (cap %d) does not alias the input", v, cap(v))
	}
	if empty == nil || len(empty) != 0 {
		t.Fatalf("empty vector read as %#v", empty)
	}
	if string(raw) != "xy" || &raw[0] != &in[5] || cap(raw) != 2 {
		t.Fatalf("raw %q (cap %d) does not alias the input", raw, cap(raw))
	}
	_ = append(v, '!')
	_ = append(raw, '!')
	if r.Uint8() != 9 || r.Finish() != nil || string(in[1:4]) != "abc" || in[7] != 9 {
		t.Fatal("appending to a view changed the input")
	}
	c := codec.NewReader(in)
	if cp := c.Opaque(); &cp[0] == &in[1] {
		t.Fatal("a plain Reader returned a view")
	}
}

// Vector hands fn the Reader itself, limited to the vector's content: fn
// reads nested vectors, bytes fn leaves are ErrTrailingData, and after
// the vector the Reader continues with what follows it.
func TestVectorLimitsTheReader(t *testing.T) {
	w := codec.NewWriter(32)
	w.Vector(func(w *codec.Writer) {
		w.Uint8(1)
		w.Vector(func(w *codec.Writer) { w.Uint16(0x0203) })
		w.Opaque([]byte("z"))
	})
	w.Uint8(7)
	in, _ := w.Bytes()

	r := codec.NewReader(in)
	var got []uint16
	r.Vector(func(sub *codec.Reader) {
		got = append(got, uint16(sub.Uint8()))
		sub.Vector(func(sub *codec.Reader) { got = append(got, sub.Uint16()) })
		if string(sub.Opaque()) != "z" || sub.Len() != 0 {
			t.Fatalf("nested read: %d bytes left", sub.Len())
		}
	})
	if r.Uint8() != 7 || r.Finish() != nil || len(got) != 2 || got[0] != 1 || got[1] != 0x0203 {
		t.Fatalf("read %v, reader %v", got, r.Err())
	}

	r = codec.NewReader(in)
	r.Vector(func(sub *codec.Reader) {
		sub.Uint8()
		if sub.Len() != len(in)-1-1-1 { // outer header, the byte read, the trailing 7
			t.Fatalf("the vector's reader sees %d bytes", sub.Len())
		}
	})
	if !errors.Is(r.Err(), codec.ErrTrailingData) || r.Uint8() != 0 {
		t.Fatalf("bytes left in the vector: %v", r.Err())
	}
}
