package codec

import "errors"

// Sentinel errors; every error returned by a [Reader] or [Writer] wraps one.
var (
	// ErrTruncated means the input ended before the value did.
	ErrTruncated = errors.New("codec: truncated input")
	// ErrTrailingData means bytes were left after a complete value.
	ErrTrailingData = errors.New("codec: trailing data")
	// ErrNonMinimalLength means a vector length was not in its shortest form (§2.1.2).
	ErrNonMinimalLength = errors.New("codec: non-minimal vector length")
	// ErrLengthTooLarge means a vector length exceeds the input or the 2^30-1 limit,
	// or uses the reserved two-bit prefix 0b11.
	ErrLengthTooLarge = errors.New("codec: vector length too large")
	// ErrInvalidValue means a field holds a value the structure does not allow,
	// such as an optional presence byte other than 0 or 1 or an unknown enum
	// value in a select.
	ErrInvalidValue = errors.New("codec: invalid value")
)
