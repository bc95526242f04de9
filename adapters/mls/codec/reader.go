package codec

import (
	"encoding/binary"
	"fmt"
)

// Unmarshaler is implemented by every MLS structure that can decode itself.
type Unmarshaler interface {
	// UnmarshalMLS reads the value from r. Failures are recorded in r.
	UnmarshalMLS(r *Reader)
}

// Reader decodes TLS-encoded values from a byte slice. It never panics and
// never allocates more than the remaining input for a length it reads. The
// first error sticks: later reads return zero values.
type Reader struct {
	data []byte
	err  error
	view bool // Opaque and Raw return views of data, not copies
}

// NewReader returns a Reader over b. The Reader does not modify b; slices
// it returns are copies.
func NewReader(b []byte) *Reader { return &Reader{data: b} }

// NewViewReader returns a Reader over b whose Opaque and Raw return views
// of b instead of copies: slices of b whose capacity ends with them, so
// that appending to one never writes into b. It is for a caller that owns
// b and never changes it while anything decoded from it is in use (a
// decrypted plaintext decoded once): a large structure then costs no copy
// of its every field.
func NewViewReader(b []byte) *Reader { return &Reader{data: b, view: true} }

// Err returns the first decoding error, if any.
func (r *Reader) Err() error { return r.err }

// Fail records err as the reader's error unless one is already recorded,
// and stops further reading.
func (r *Reader) Fail(err error) {
	if r.err == nil && err != nil {
		r.err = err
		r.data = nil
	}
}

// Failf records an error wrapping ErrInvalidValue with a formatted message.
func (r *Reader) Failf(format string, args ...any) {
	r.Fail(fmt.Errorf("%w: "+format, append([]any{ErrInvalidValue}, args...)...))
}

// Len returns the number of unread bytes.
func (r *Reader) Len() int { return len(r.data) }

// Empty reports whether no unread bytes remain or an error stopped reading.
func (r *Reader) Empty() bool { return r.err != nil || len(r.data) == 0 }

// Finish returns the first decoding error, or ErrTrailingData when unread
// bytes remain.
func (r *Reader) Finish() error {
	if r.err != nil {
		return r.err
	}
	if len(r.data) != 0 {
		return fmt.Errorf("%w: %d bytes after the value", ErrTrailingData, len(r.data))
	}
	return nil
}

func (r *Reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.data) {
		r.Fail(fmt.Errorf("%w: need %d bytes, have %d", ErrTruncated, n, len(r.data)))
		return nil
	}
	b := r.data[:n:n]
	r.data = r.data[n:]
	return b
}

// Uint8 reads one byte.
func (r *Reader) Uint8() uint8 {
	b := r.take(1)
	if b == nil {
		return 0
	}
	return b[0]
}

// Uint16 reads a big-endian uint16.
func (r *Reader) Uint16() uint16 {
	b := r.take(2)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint16(b)
}

// Uint32 reads a big-endian uint32.
func (r *Reader) Uint32() uint32 {
	b := r.take(4)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}

// Uint64 reads a big-endian uint64.
func (r *Reader) Uint64() uint64 {
	b := r.take(8)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// Bool reads a one-byte boolean or optional presence flag; any value other
// than 0 or 1 is ErrInvalidValue.
func (r *Reader) Bool() bool {
	v := r.Uint8()
	if v > 1 {
		r.Failf("presence byte %d", v)
		return false
	}
	return v == 1
}

// Raw reads a fixed-size array of n bytes and returns a copy (a view for
// a [NewViewReader]).
func (r *Reader) Raw(n int) []byte {
	b := r.take(n)
	if b == nil || r.view {
		return b
	}
	return append([]byte(nil), b...)
}

// length reads a vector header and checks it against the remaining input.
func (r *Reader) length() (int, bool) {
	if r.err != nil {
		return 0, false
	}
	n, size, err := ParseLength(r.data)
	if err != nil {
		r.Fail(err)
		return 0, false
	}
	r.data = r.data[size:]
	if n > len(r.data) {
		r.Fail(fmt.Errorf("%w: vector of %d bytes, %d remain", ErrLengthTooLarge, n, len(r.data)))
		return 0, false
	}
	return n, true
}

// Opaque reads a variable-size vector opaque<V> and returns a copy of its
// content (an empty, non-nil slice for an empty vector).
func (r *Reader) Opaque() []byte {
	n, ok := r.length()
	if !ok {
		return nil
	}
	if r.view {
		if b := r.take(n); b != nil {
			return b
		}
		return []byte{}
	}
	return append([]byte{}, r.take(n)...)
}

// OpaqueView reads a variable-size vector opaque<V> like Opaque, without
// copying: the result aliases the Reader's input, for callers that own it
// and do not change it while the result is in use.
func (r *Reader) OpaqueView() []byte {
	n, ok := r.length()
	if !ok {
		return nil
	}
	return r.take(n)
}

// Vector reads a variable-size vector and calls fn with a Reader over its
// content. fn must consume the whole content; leftover bytes are
// ErrTrailingData. Errors inside fn become r's error. The Reader fn gets
// is r itself, limited to the vector's content until fn returns (a
// decoder reads thousands of vectors: none allocates a Reader); fn must
// not keep it.
func (r *Reader) Vector(fn func(sub *Reader)) {
	n, ok := r.length()
	if !ok {
		return
	}
	rest := r.data[n:]
	r.data = r.data[:n:n]
	fn(r)
	if r.err != nil {
		return
	}
	if len(r.data) != 0 {
		r.Fail(fmt.Errorf("%w: %d bytes after the value", ErrTrailingData, len(r.data)))
		return
	}
	r.data = rest
}

// VectorEach reads a variable-size vector of items, calling item once per
// element until the content is used up. An item that consumes nothing
// without failing is ErrInvalidValue, so decoding always terminates.
func (r *Reader) VectorEach(item func(sub *Reader)) {
	r.Vector(func(sub *Reader) {
		for !sub.Empty() {
			before := sub.Len()
			item(sub)
			if sub.err == nil && sub.Len() == before {
				sub.Failf("vector element of zero length")
			}
		}
	})
}

// Value decodes u from r.
func (r *Reader) Value(u Unmarshaler) {
	if r.err == nil {
		u.UnmarshalMLS(r)
	}
}

// Unmarshal decodes exactly one value from b into u: any error of u's
// decoder, or trailing bytes, is returned.
func Unmarshal(b []byte, u Unmarshaler) error {
	r := NewReader(b)
	u.UnmarshalMLS(r)
	return r.Finish()
}

// UnmarshalView is Unmarshal with a [NewViewReader]: the byte slices of u
// alias b, which must not change while u is in use.
func UnmarshalView(b []byte, u Unmarshaler) error {
	r := NewViewReader(b)
	u.UnmarshalMLS(r)
	return r.Finish()
}
