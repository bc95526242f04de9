package codec

import (
	"encoding/binary"
	"fmt"
)

// Marshaler is implemented by every MLS structure that can encode itself.
type Marshaler interface {
	// MarshalMLS appends the TLS encoding of the value to w.
	MarshalMLS(w *Writer)
}

// Writer appends TLS-encoded values to a buffer. The zero value is ready to
// use. The first error (a vector too long for §2.1.2) sticks and is reported
// by [Writer.Bytes] and [Writer.Err].
type Writer struct {
	buf []byte
	err error
}

// NewWriter returns a Writer whose buffer starts with capacity for size bytes.
func NewWriter(size int) *Writer {
	if size < 0 {
		size = 0
	}
	return &Writer{buf: make([]byte, 0, size)}
}

// NewWriterOn returns a Writer that appends to dst: Bytes returns dst
// extended by what was written.
func NewWriterOn(dst []byte) *Writer { return &Writer{buf: dst} }

// Bytes returns the encoded bytes, or the first error met while encoding.
func (w *Writer) Bytes() ([]byte, error) {
	if w.err != nil {
		return nil, w.err
	}
	return w.buf, nil
}

// Len returns the number of bytes written so far.
func (w *Writer) Len() int { return len(w.buf) }

// Reset empties w, keeping its buffer, so that one Writer can encode many
// values in turn; bytes Bytes returned before are overwritten.
func (w *Writer) Reset() { w.buf, w.err = w.buf[:0], nil }

// Err returns the first error met while encoding, if any.
func (w *Writer) Err() error { return w.err }

// Fail records err as the writer's error unless one is already recorded.
func (w *Writer) Fail(err error) {
	if w.err == nil && err != nil {
		w.err = err
	}
}

// Uint8 appends v.
func (w *Writer) Uint8(v uint8) { w.buf = append(w.buf, v) }

// Uint16 appends v in network byte order.
func (w *Writer) Uint16(v uint16) { w.buf = binary.BigEndian.AppendUint16(w.buf, v) }

// Uint32 appends v in network byte order.
func (w *Writer) Uint32(v uint32) { w.buf = binary.BigEndian.AppendUint32(w.buf, v) }

// Uint64 appends v in network byte order.
func (w *Writer) Uint64(v uint64) { w.buf = binary.BigEndian.AppendUint64(w.buf, v) }

// Bool appends v as one byte, 1 for true and 0 for false (also the presence
// byte of an optional value).
func (w *Writer) Bool(v bool) {
	if v {
		w.buf = append(w.buf, 1)
	} else {
		w.buf = append(w.buf, 0)
	}
}

// Raw appends b as a fixed-size array: no length prefix.
func (w *Writer) Raw(b []byte) { w.buf = append(w.buf, b...) }

// Opaque appends b as a variable-size vector opaque<V>.
func (w *Writer) Opaque(b []byte) {
	var err error
	w.buf, err = AppendLength(w.buf, len(b))
	w.Fail(err)
	w.buf = append(w.buf, b...)
}

// Vector appends a variable-size vector whose content is whatever fn writes,
// prefixed by its minimal length.
func (w *Writer) Vector(fn func(w *Writer)) {
	start := len(w.buf)
	fn(w)
	n := len(w.buf) - start
	if n > MaxVectorLength {
		w.Fail(fmt.Errorf("%w: %d bytes", ErrLengthTooLarge, n))
		return
	}
	hs := lengthSize(n)
	w.buf = append(w.buf, make([]byte, hs)...)
	copy(w.buf[start+hs:], w.buf[start:start+n])
	var room [4]byte
	hdr, _ := AppendLength(room[:0], n)
	copy(w.buf[start:], hdr)
}

// Value appends m's encoding.
func (w *Writer) Value(m Marshaler) { m.MarshalMLS(w) }

// Marshal returns the TLS encoding of m.
func Marshal(m Marshaler) ([]byte, error) {
	w := NewWriter(64)
	m.MarshalMLS(w)
	return w.Bytes()
}
