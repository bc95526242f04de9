package metadata

import "fmt"

// maxVarint is the largest length the RFC 9420 §2.1.2 encoding carries
// (2^30 - 1).
const maxVarint = 1<<30 - 1

// readVector reads a variable-length-prefixed opaque vector and returns its
// body and the bytes after it. The length must use the minimal encoding
// (RFC 9420 §2.1.2).
func readVector(b []byte) (body, rest []byte, err error) {
	if len(b) == 0 {
		return nil, nil, fmt.Errorf("vector length missing: %w", ErrMalformed)
	}
	var n uint64
	var size int
	switch b[0] >> 6 {
	case 0:
		n, size = uint64(b[0]&0x3f), 1
	case 1:
		if len(b) < 2 {
			return nil, nil, fmt.Errorf("vector length truncated: %w", ErrMalformed)
		}
		n, size = uint64(b[0]&0x3f)<<8|uint64(b[1]), 2
		if n < 64 {
			return nil, nil, fmt.Errorf("vector length %d not minimally encoded: %w", n, ErrMalformed)
		}
	case 2:
		if len(b) < 4 {
			return nil, nil, fmt.Errorf("vector length truncated: %w", ErrMalformed)
		}
		n = uint64(b[0]&0x3f)<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])
		size = 4
		if n < 1<<14 {
			return nil, nil, fmt.Errorf("vector length %d not minimally encoded: %w", n, ErrMalformed)
		}
	default:
		return nil, nil, fmt.Errorf("vector length prefix 0b11: %w", ErrMalformed)
	}
	if uint64(len(b)-size) < n {
		return nil, nil, fmt.Errorf("vector of %d bytes truncated at %d: %w", n, len(b)-size, ErrMalformed)
	}
	return b[size : size+int(n)], b[size+int(n):], nil
}

// appendVector appends body with its minimal variable-length prefix.
func appendVector(dst, body []byte) ([]byte, error) {
	n := len(body)
	switch {
	case n < 1<<6:
		dst = append(dst, byte(n))
	case n < 1<<14:
		dst = append(dst, byte(n>>8)|0x40, byte(n))
	case n <= maxVarint:
		dst = append(dst, byte(n>>24)|0x80, byte(n>>16), byte(n>>8), byte(n))
	default:
		return nil, fmt.Errorf("vector of %d bytes too long: %w", n, ErrMalformed)
	}
	return append(dst, body...), nil
}
