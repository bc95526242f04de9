package group

import (
	"errors"
	"fmt"
)

// Kinds of invalid messages. An error of [ErrInvalid] that one of these
// also marks names the check that failed, so that a validator reports
// why it refused a message (a delivery service's refusal reasons); an
// error marked by none broke another rule of RFC 9420, mostly of the
// proposals (§12.1, §12.2) or of the commit (§12.4).
var (
	// ErrSignature marks a signature that does not verify: of a message
	// or of a GroupInfo.
	ErrSignature = errors.New("group: bad signature")
	// ErrSender marks a message whose sender cannot send it: a blank
	// leaf, a sender type this view does not accept, an external commit
	// without its joiner's path, or a GroupInfo signed by no member.
	ErrSender = errors.New("group: bad sender")
	// ErrLeafNode marks a leaf node (added, updated or on a commit's
	// path) that breaks §7.3: signature, source, capabilities,
	// credential or unique keys.
	ErrLeafNode = errors.New("group: bad leaf node")
	// ErrTree marks a received ratchet tree that fails §12.4.3.1 or
	// does not match the group context's tree hash.
	ErrTree = errors.New("group: bad ratchet tree")
)

// invalidAs returns an error of ErrInvalid marked as kind.
func invalidAs(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %w: "+format, append([]any{ErrInvalid, kind}, args...)...)
}

// wrapAs returns err as an error of ErrInvalid marked as kind.
func wrapAs(kind, err error) error {
	return fmt.Errorf("%w: %w: %w", ErrInvalid, kind, err)
}
