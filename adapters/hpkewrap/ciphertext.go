package hpkewrap

import (
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/ports"
)

// appendOpaque appends b as an RFC 9420 opaque<V> (section 2.1.2); callers
// have checked that len(b) fits a length prefix.
func appendOpaque(dst, b []byte) []byte {
	dst, _ = codec.AppendLength(dst, len(b))
	return append(dst, b...)
}

// readOpaque reads one opaque<V> from the front of b and returns it and the
// rest. It rejects the reserved 0b11 prefix, non-minimal prefixes and lengths
// that run past the end of b.
func readOpaque(b []byte) (v, rest []byte, err error) {
	n, size, err := codec.ParseLength(b)
	if err != nil {
		return nil, nil, err
	}
	if len(b)-size < n {
		return nil, nil, fmt.Errorf("length %d exceeds the %d bytes left", n, len(b)-size)
	}
	return b[size : size+n : size+n], b[size+n:], nil
}

// MarshalCiphertext returns the TLS encoding of HpkeCiphertext{opaque
// kem_output<V>; opaque ciphertext<V>} (RFC 9420 section 5.1.3), the layout
// of WelcomeMessage.V1.data. It fails with ports.ErrInvalidInput only when a
// field exceeds the 2^30-1 bytes a prefix can carry.
func MarshalCiphertext(kemOutput, ciphertext []byte) ([]byte, error) {
	if len(kemOutput) > codec.MaxVectorLength || len(ciphertext) > codec.MaxVectorLength {
		return nil, fmt.Errorf("marshal hpke ciphertext: %w: field longer than 2^30-1 bytes", ports.ErrInvalidInput)
	}
	out := make([]byte, 0, 8+len(kemOutput)+len(ciphertext))
	out = appendOpaque(out, kemOutput)
	return appendOpaque(out, ciphertext), nil
}

// ParseCiphertext decodes a TLS HpkeCiphertext. The returned slices alias b.
// Input that is not exactly one well-formed HpkeCiphertext (bad prefix,
// truncation, trailing bytes) yields an error wrapping ports.ErrCorrupt.
func ParseCiphertext(b []byte) (kemOutput, ciphertext []byte, err error) {
	kemOutput, rest, err := readOpaque(b)
	if err != nil {
		return nil, nil, fmt.Errorf("parse hpke ciphertext: kem_output: %w: %v", ports.ErrCorrupt, err)
	}
	ciphertext, rest, err = readOpaque(rest)
	if err != nil {
		return nil, nil, fmt.Errorf("parse hpke ciphertext: ciphertext: %w: %v", ports.ErrCorrupt, err)
	}
	if len(rest) != 0 {
		return nil, nil, fmt.Errorf("parse hpke ciphertext: %w: %d trailing bytes", ports.ErrCorrupt, len(rest))
	}
	return kemOutput, ciphertext, nil
}

// EncryptContext returns the TLS encoding of RFC 9420's EncryptContext{opaque
// label<V>; opaque context<V>} for the full label (including the "MLS 1.0 "
// prefix). EncryptContext("MLS 1.0 MLS_WELCOME", nil) equals
// ports.WelcomeWrapperInfo.
func EncryptContext(label string, context []byte) []byte {
	out := appendOpaque(nil, []byte(label))
	return appendOpaque(out, context)
}
