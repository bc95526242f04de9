// Package codec implements the TLS presentation language of RFC 9420 §2.1 as
// used by MLS: unsigned integers, fixed-size arrays, variable-size vectors
// with the QUIC-style variable-length header of §2.1.2, optional values and
// enumerations.
//
// # Encoding
//
// A [Writer] appends big-endian integers and length-prefixed vectors to a
// buffer. Vector lengths are always written in their minimal form; a vector
// longer than 2^30-1 bytes cannot be expressed and makes [Writer.Bytes]
// return [ErrLengthTooLarge].
//
// # Decoding
//
// A [Reader] is strict. Truncated input, a length written in a longer form
// than needed, a length prefix larger than the remaining input, an optional
// presence byte other than 0 or 1 and bytes left over after the value all
// are errors. The first error sticks: every later read returns a zero value
// and [Reader.Err] reports that first error. A length is always checked
// against the remaining input before anything is allocated for it, so a
// hostile length can never make the decoder allocate more than the input
// size. No function of this package panics on any input.
//
// # Errors
//
// Every decoding failure wraps one of the sentinels [ErrTruncated],
// [ErrTrailingData], [ErrNonMinimalLength], [ErrLengthTooLarge] or
// [ErrInvalidValue], so callers can classify it with errors.Is.
package codec
