package codec_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/internal/vectors"
)

// TestDeserializationVectors checks the §2.1.2 header of every case of
// deserialization.json both ways.
func TestDeserializationVectors(t *testing.T) {
	var cases []struct {
		Header vectors.Hex `json:"vlbytes_header"`
		Length int         `json:"length"`
	}
	vectors.Load(t, "deserialization.json", &cases)
	for i, c := range cases {
		t.Run(fmt.Sprintf("deserialization/%d", i), func(t *testing.T) {
			n, size, err := codec.ParseLength(c.Header)
			if err != nil || n != c.Length || size != len(c.Header) {
				t.Fatalf("ParseLength(%x) = %d, %d, %v; want %d", c.Header, n, size, err, c.Length)
			}
			enc, err := codec.AppendLength(nil, c.Length)
			if err != nil || !bytes.Equal(enc, c.Header) {
				t.Fatalf("AppendLength(%d) = %x, %v; want %x", c.Length, enc, err, c.Header)
			}
		})
	}
}

// TestStrictDecoding: each malformed input fails with its error class.
func TestStrictDecoding(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		read func(r *codec.Reader)
		want error
	}{
		{"uint16 cut short", []byte{1}, func(r *codec.Reader) { r.Uint16() }, codec.ErrTruncated},
		{"uint64 cut short", []byte{1, 2, 3}, func(r *codec.Reader) { r.Uint64() }, codec.ErrTruncated},
		{"trailing byte after uint8", []byte{1, 2}, func(r *codec.Reader) { r.Uint8() }, codec.ErrTrailingData},
		{"63 written in two bytes", append([]byte{0x40, 0x3f}, make([]byte, 63)...), func(r *codec.Reader) { r.Opaque() }, codec.ErrNonMinimalLength},
		{"5 written in four bytes", []byte{0x80, 0, 0, 5, 1, 2, 3, 4, 5}, func(r *codec.Reader) { r.Opaque() }, codec.ErrNonMinimalLength},
		{"reserved prefix 0b11", []byte{0xc0, 0, 0, 0, 0, 0, 0, 1}, func(r *codec.Reader) { r.Opaque() }, codec.ErrLengthTooLarge},
		{"length past input", []byte{0xbf, 0xff, 0xff, 0xff, 1}, func(r *codec.Reader) { r.Opaque() }, codec.ErrLengthTooLarge},
		{"header cut short", []byte{0x40}, func(r *codec.Reader) { r.Opaque() }, codec.ErrTruncated},
		{"presence byte 2", []byte{2}, func(r *codec.Reader) { r.Bool() }, codec.ErrInvalidValue},
		{"vector content left over", []byte{3, 0, 1, 2}, func(r *codec.Reader) {
			r.Vector(func(s *codec.Reader) { s.Uint16() })
		}, codec.ErrTrailingData},
		{"zero-length element", []byte{1, 0}, func(r *codec.Reader) {
			r.VectorEach(func(s *codec.Reader) {})
		}, codec.ErrInvalidValue},
		{"fixed array cut short", []byte{1, 2}, func(r *codec.Reader) { r.Raw(4) }, codec.ErrTruncated},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := codec.NewReader(c.in)
			c.read(r)
			if err := r.Finish(); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

// TestRoundTrip writes one of each kind and reads it back.
func TestRoundTrip(t *testing.T) {
	w := codec.NewWriter(0)
	w.Uint8(7)
	w.Uint16(0x1234)
	w.Uint32(0xdeadbeef)
	w.Uint64(1 << 40)
	w.Bool(true)
	w.Raw([]byte{9, 9})
	big := bytes.Repeat([]byte{0xab}, 20000)
	w.Opaque(big)
	w.Vector(func(w *codec.Writer) {
		for i := range 100 {
			w.Uint16(uint16(i))
		}
	})
	b, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	r := codec.NewReader(b)
	if r.Uint8() != 7 || r.Uint16() != 0x1234 || r.Uint32() != 0xdeadbeef || r.Uint64() != 1<<40 || !r.Bool() {
		t.Fatal("integers differ")
	}
	if !bytes.Equal(r.Raw(2), []byte{9, 9}) || !bytes.Equal(r.Opaque(), big) {
		t.Fatal("byte strings differ")
	}
	var got []uint16
	r.VectorEach(func(s *codec.Reader) { got = append(got, s.Uint16()) })
	if err := r.Finish(); err != nil || len(got) != 100 || got[99] != 99 {
		t.Fatalf("vector: %v %v", got, err)
	}
}

// TestWriterRejectsHugeVector: a vector over 2^30-1 bytes cannot be encoded.
func TestWriterRejectsHugeVector(t *testing.T) {
	if _, err := codec.AppendLength(nil, codec.MaxVectorLength+1); !errors.Is(err, codec.ErrLengthTooLarge) {
		t.Fatalf("got %v", err)
	}
}

// FuzzReader decodes a small grammar (uint16, opaque, vector of opaque,
// optional uint32) and checks that whatever decodes re-encodes byte-exact.
func FuzzReader(f *testing.F) {
	var cases []struct {
		Header vectors.Hex `json:"vlbytes_header"`
	}
	if _, ok := vectors.Path("deserialization.json"); ok {
		vectors.Load(f, "deserialization.json", &cases)
		for _, c := range cases {
			f.Add(append([]byte{0, 1}, c.Header...))
		}
	}
	f.Add([]byte{0, 1, 2, 'h', 'i', 3, 2, 'a', 'b', 1, 0, 0, 0, 5})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := codec.NewReader(in)
		a := r.Uint16()
		op := r.Opaque()
		var items [][]byte
		r.VectorEach(func(s *codec.Reader) { items = append(items, s.Opaque()) })
		present := r.Bool()
		var v uint32
		if present {
			v = r.Uint32()
		}
		if r.Finish() != nil {
			return
		}
		w := codec.NewWriter(len(in))
		w.Uint16(a)
		w.Opaque(op)
		w.Vector(func(w *codec.Writer) {
			for _, it := range items {
				w.Opaque(it)
			}
		})
		w.Bool(present)
		if present {
			w.Uint32(v)
		}
		out, err := w.Bytes()
		if err != nil || !bytes.Equal(out, in) {
			t.Fatalf("re-encode %x -> %x (%v)", in, out, err)
		}
	})
}

// OpaqueView reads what Opaque reads, without a copy: the result aliases
// the input and is capped at its length, so appending to it never writes
// into the bytes that follow; a truncated vector fails like Opaque.
func TestOpaqueViewAliasesTheInput(t *testing.T) {
	w := codec.NewWriter(16)
	w.Opaque([]byte("abc"))
	w.Uint8(9)
	in, _ := w.Bytes()
	r := codec.NewReader(in)
	v := r.OpaqueView()
	if string(v) != "abc" || &v[0] != &in[1] || cap(v) != 3 {
		t.Fatalf("view %q (cap %d) does not alias the input", v, cap(v))
	}
	_ = append(v, 'x')
	if r.Uint8() != 9 || r.Finish() != nil {
		t.Fatal("appending to the view changed the bytes after it")
	}
	short := []byte{5, 'a'}
	rv, ro := codec.NewReader(short), codec.NewReader(short)
	if rv.OpaqueView() != nil || ro.Opaque() != nil || rv.Err() == nil || rv.Err().Error() != ro.Err().Error() {
		t.Fatalf("truncated vector: view %v, opaque %v", rv.Err(), ro.Err())
	}
}

// Reset empties a Writer, error included, and later values encode as in a
// new Writer.
func TestWriterReset(t *testing.T) {
	w := codec.NewWriter(4)
	w.Opaque(make([]byte, 5))
	w.Fail(errors.New("broken"))
	w.Reset()
	w.Uint16(0x0102)
	got, err := w.Bytes()
	if err != nil || !bytes.Equal(got, []byte{1, 2}) {
		t.Fatalf("after Reset: %x, %v", got, err)
	}
}
