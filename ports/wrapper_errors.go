package ports

import "errors"

// Wrapper and pointee AEAD error classes. Every [WrapperAlgorithm] and
// [PointeeAEAD] implementation, in-process or hosted in a plugin, reports its
// failures as errors wrapping exactly one of these, so core decides what to do
// with a Welcome by errors.Is and never by matching text.
var (
	// ErrNotRecipient reports a sealed Welcome that was not sealed to the
	// private key it was opened with. A wrong key, a wrong info string and a
	// tampered first payload are indistinguishable to the recipient and all
	// report this class.
	ErrNotRecipient = errors.New("not sealed to this key")
	// ErrUnsupportedAlgorithm reports an algorithm identifier nobody
	// registered. The Welcome is held, not rejected (JOIN-087): an upgrade
	// can make it readable.
	ErrUnsupportedAlgorithm = errors.New("unsupported algorithm")
	// ErrCorrupt reports a ciphertext that does not decode, or that fails
	// authentication after the recipient was established (a later payload
	// of a wrapper, or any pointee ciphertext). Retrying it fails again.
	ErrCorrupt = errors.New("corrupt ciphertext")
	// ErrInvalidKey reports a public or private key the algorithm cannot use:
	// wrong size, or a value on which HPKE sender setup fails (JOIN-090).
	ErrInvalidKey = errors.New("invalid key")
	// ErrInvalidInput reports any other argument the algorithm refuses for
	// what it is: no payload, a nonce of the wrong size.
	ErrInvalidInput = errors.New("invalid input")
	// ErrAlgorithmUnavailable reports that the implementation could not be
	// reached or did not answer in time (a plugin that crashed or hangs).
	// It is a local failure, not a property of the Welcome: the call may
	// succeed when retried (JOIN-085).
	ErrAlgorithmUnavailable = errors.New("algorithm implementation unavailable")
)

// Hosted is implemented by a [WrapperAlgorithm] or [PointeeAEAD] whose
// implementation runs in another process (a plugin). Its results cross a
// process boundary the algorithm's own authentication does not cover: a
// plaintext it returns that cannot be read may be the process's fault, not
// the ciphertext's, so core does not take it alone as proof of a corrupt
// Welcome.
type Hosted interface {
	// HostedBy names the process that serves the algorithm.
	HostedBy() string
}
