package codec

import "fmt"

// MaxVectorLength is the largest vector length that the §2.1.2 header can carry.
const MaxVectorLength = 1<<30 - 1

// AppendLength appends the minimal §2.1.2 variable-length header for n to b.
// It returns ErrLengthTooLarge when n exceeds [MaxVectorLength].
func AppendLength(b []byte, n int) ([]byte, error) {
	switch {
	case n < 0 || n > MaxVectorLength:
		return b, fmt.Errorf("%w: %d bytes", ErrLengthTooLarge, n)
	case n < 1<<6:
		return append(b, byte(n)), nil
	case n < 1<<14:
		return append(b, 0x40|byte(n>>8), byte(n)), nil
	default:
		return append(b, 0x80|byte(n>>24), byte(n>>16), byte(n>>8), byte(n)), nil
	}
}

// lengthSize returns the size of the minimal header for n (n ≤ MaxVectorLength).
func lengthSize(n int) int {
	switch {
	case n < 1<<6:
		return 1
	case n < 1<<14:
		return 2
	default:
		return 4
	}
}

// ParseLength decodes a §2.1.2 variable-length header at the start of b and
// returns the length and the header size. It rejects the reserved prefix
// 0b11, truncated headers and non-minimal encodings; it does not compare the
// length with the rest of b.
func ParseLength(b []byte) (length, size int, err error) {
	if len(b) == 0 {
		return 0, 0, fmt.Errorf("%w: missing vector length", ErrTruncated)
	}
	size = 1 << (b[0] >> 6)
	if size == 8 {
		return 0, 0, fmt.Errorf("%w: reserved length prefix 0b11", ErrLengthTooLarge)
	}
	if len(b) < size {
		return 0, 0, fmt.Errorf("%w: vector length needs %d bytes, have %d", ErrTruncated, size, len(b))
	}
	length = int(b[0] & 0x3f)
	for i := 1; i < size; i++ {
		length = length<<8 | int(b[i])
	}
	if lengthSize(length) != size {
		return 0, 0, fmt.Errorf("%w: %d written in %d bytes", ErrNonMinimalLength, length, size)
	}
	return length, size, nil
}
