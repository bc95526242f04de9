package hpkewrap

import (
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/ports"
)

// maxVectorLen is the largest length an RFC 9420 variable-length prefix can
// encode (a 4-byte prefix carries 30 bits).
const maxVectorLen = 1<<30 - 1

var errVarint = errors.New("bad variable-length prefix")

// appendOpaque appends b as an RFC 9420 opaque<V>: a minimal 1, 2 or 4 byte
// length prefix (section 2.1.2) followed by the bytes.
func appendOpaque(dst, b []byte) []byte {
	n := len(b)
	switch {
	case n < 1<<6:
		dst = append(dst, byte(n))
	case n < 1<<14:
		dst = append(dst, 0x40|byte(n>>8), byte(n))
	default:
		dst = append(dst, 0x80|byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(dst, b...)
}

// readOpaque reads one opaque<V> from the front of b and returns it and the
// rest. It rejects the reserved 0b11 prefix, non-minimal prefixes and lengths
// that run past the end of b.
func readOpaque(b []byte) (v, rest []byte, err error) {
	if len(b) == 0 {
		return nil, nil, fmt.Errorf("%w: empty input", errVarint)
	}
	var n, size int
	switch b[0] >> 6 {
	case 0:
		n, size = int(b[0]&0x3f), 1
	case 1:
		if len(b) < 2 {
			return nil, nil, fmt.Errorf("%w: truncated 2-byte prefix", errVarint)
		}
		n, size = int(b[0]&0x3f)<<8|int(b[1]), 2
		if n < 1<<6 {
			return nil, nil, fmt.Errorf("%w: non-minimal 2-byte prefix for %d", errVarint, n)
		}
	case 2:
		if len(b) < 4 {
			return nil, nil, fmt.Errorf("%w: truncated 4-byte prefix", errVarint)
		}
		n, size = int(b[0]&0x3f)<<24|int(b[1])<<16|int(b[2])<<8|int(b[3]), 4
		if n < 1<<14 {
			return nil, nil, fmt.Errorf("%w: non-minimal 4-byte prefix for %d", errVarint, n)
		}
	default:
		return nil, nil, fmt.Errorf("%w: reserved prefix 0b11", errVarint)
	}
	if len(b)-size < n {
		return nil, nil, fmt.Errorf("%w: length %d exceeds the %d bytes left", errVarint, n, len(b)-size)
	}
	return b[size : size+n : size+n], b[size+n:], nil
}

// MarshalCiphertext returns the TLS encoding of HpkeCiphertext{opaque
// kem_output<V>; opaque ciphertext<V>} (RFC 9420 section 5.1.3), the layout
// of WelcomeMessage.V1.data. It fails with ports.ErrInvalidInput only when a
// field exceeds the 2^30-1 bytes a prefix can carry.
func MarshalCiphertext(kemOutput, ciphertext []byte) ([]byte, error) {
	if len(kemOutput) > maxVectorLen || len(ciphertext) > maxVectorLen {
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
