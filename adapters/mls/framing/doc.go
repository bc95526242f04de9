// Package framing implements MLS message framing (RFC 9420 §6): the
// [FramedContent] a member authors, its signature and confirmation tag
// ([AuthenticatedContent]), the two protected forms [PublicMessage]
// (signature plus membership tag, §6.2) and [PrivateMessage] (sender data
// and content encryption with padding, §6.3), and the [MLSMessage] envelope
// for every wire format.
//
// # Protecting and unprotecting
//
// [Sign] turns FramedContent into AuthenticatedContent; [NewPublicMessage]
// adds the membership tag and [Encrypt] produces a PrivateMessage from the
// epoch's secret tree and sender_data_secret. [PublicMessage.Unprotect] and
// [Decrypt] go back; the caller then checks the signature with
// [AuthenticatedContent.Verify] against the sender's leaf, which only the
// group engine knows.
//
// # Errors
//
// [ErrDecrypt] (undecryptable: wrong epoch secrets, a forged or corrupted
// ciphertext, a used generation), [ErrMembershipTag], [ErrSignature] and
// [ErrNotAllowed] (a combination §6 forbids, such as an application message
// as PublicMessage) classify failures; decoding errors wrap the codec
// sentinels. Nothing panics on any input.
package framing

import "errors"

// Sentinel errors.
var (
	// ErrDecrypt means a PrivateMessage could not be decrypted.
	ErrDecrypt = errors.New("framing: cannot decrypt message")
	// ErrMembershipTag means a PublicMessage's membership tag is wrong or missing.
	ErrMembershipTag = errors.New("framing: bad membership tag")
	// ErrSignature means the content signature does not verify.
	ErrSignature = errors.New("framing: bad signature")
	// ErrNotAllowed means §6 forbids the requested combination.
	ErrNotAllowed = errors.New("framing: not allowed")
)
