package host

import (
	"fmt"

	"github.com/regroup-mls/regroup/plugins/internal/protocol"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/pluginpb"
)

// Limits on what a plugin may declare and answer. A description outside
// them is refused at [Load]; a reply outside them fails its call with
// ports.ErrAlgorithmUnavailable and [ErrMisbehaved].
const (
	// MaxAlgorithms bounds the wrappers and AEADs one plugin serves.
	MaxAlgorithms = 64
	// MinKeySize and MaxPublicKeySize bound a wrapper's declared public
	// key size (a Classic McEliece key still fits).
	MinKeySize       = 16
	MaxPublicKeySize = 2 << 20
	// MaxPrivateKeySize bounds a private key GenerateKey returns and one
	// Open is given.
	MaxPrivateKeySize = 1 << 20
	// MaxAEADKeySize, MinNonceSize and MaxNonceSize bound a pointee
	// AEAD's declared key size (at least MinKeySize) and nonce size.
	MaxAEADKeySize = 256
	MinNonceSize   = 8
	MaxNonceSize   = 256
	// MaxWrapperOverhead bounds how much longer than its plaintext one
	// sealed payload may be (kem_output, framing and tag together).
	MaxWrapperOverhead = 64 << 10
	// MaxAEADOverhead bounds how much longer than its plaintext a pointee
	// ciphertext may be.
	MaxAEADOverhead = 256
	// MaxErrorText is how many bytes of a plugin's error text an error
	// keeps; the text is quoted, so control characters arrive escaped.
	MaxErrorText = protocol.MaxErrorText
)

// describeReplyLimit bounds the Describe reply: MaxAlgorithms entries of a
// few bytes each, with room to spare.
const describeReplyLimit = 16 << 10

// served records which plugin serves each identifier across one host.
type served struct {
	wrappers map[ports.WrapperAlgorithmID]string
	aeads    map[ports.PointeeAEADID]string
}

func newServed() *served {
	return &served{wrappers: map[ports.WrapperAlgorithmID]string{}, aeads: map[ports.PointeeAEADID]string{}}
}

// check validates the description plugin sent against the limits and
// against what other plugins of the host serve, and records its
// identifiers when it passes.
func (s *served) check(plugin string, d *pluginpb.DescribeResponse) error {
	ws, as := d.GetWrappers(), d.GetAeads()
	if len(ws)+len(as) == 0 {
		return fmt.Errorf("%w: it serves no algorithm", ErrInvalidDescription)
	}
	if len(ws)+len(as) > MaxAlgorithms {
		return fmt.Errorf("%w: %d algorithms, at most %d", ErrInvalidDescription, len(ws)+len(as), MaxAlgorithms)
	}
	wseen := map[ports.WrapperAlgorithmID]bool{}
	for _, w := range ws {
		id := ports.WrapperAlgorithmID(w.GetId())
		switch {
		case id <= ports.WrapperUnspecified || id == ports.WrapperSymmetricKey:
			return fmt.Errorf("%w: wrapper id %d names no wrapper algorithm", ErrInvalidDescription, w.GetId())
		case wseen[id]:
			return fmt.Errorf("%w: wrapper %v listed twice", ErrInvalidDescription, id)
		case s.wrappers[id] != "":
			return fmt.Errorf("%w: wrapper %v is already served by plugin %s", ErrInvalidDescription, id, s.wrappers[id])
		case w.GetPublicKeySize() < MinKeySize || w.GetPublicKeySize() > MaxPublicKeySize:
			return fmt.Errorf("%w: wrapper %v public key size %d outside [%d, %d]", ErrInvalidDescription, id, w.GetPublicKeySize(), MinKeySize, MaxPublicKeySize)
		}
		wseen[id] = true
	}
	aseen := map[ports.PointeeAEADID]bool{}
	for _, a := range as {
		id := ports.PointeeAEADID(a.GetId())
		switch {
		case id <= ports.PointeeAEADUnspecified:
			return fmt.Errorf("%w: pointee aead id %d names no aead", ErrInvalidDescription, a.GetId())
		case aseen[id]:
			return fmt.Errorf("%w: pointee aead %v listed twice", ErrInvalidDescription, id)
		case s.aeads[id] != "":
			return fmt.Errorf("%w: pointee aead %v is already served by plugin %s", ErrInvalidDescription, id, s.aeads[id])
		case a.GetKeySize() < MinKeySize || a.GetKeySize() > MaxAEADKeySize:
			return fmt.Errorf("%w: pointee aead %v key size %d outside [%d, %d]", ErrInvalidDescription, id, a.GetKeySize(), MinKeySize, MaxAEADKeySize)
		case a.GetNonceSize() < MinNonceSize || a.GetNonceSize() > MaxNonceSize:
			return fmt.Errorf("%w: pointee aead %v nonce size %d outside [%d, %d]", ErrInvalidDescription, id, a.GetNonceSize(), MinNonceSize, MaxNonceSize)
		}
		aseen[id] = true
	}
	for id := range wseen {
		s.wrappers[id] = plugin
	}
	for id := range aseen {
		s.aeads[id] = plugin
	}
	return nil
}
