package join

import (
	"errors"
	"fmt"
)

var (
	// ErrRejected is wrapped by every terminal refusal of a Welcome.
	ErrRejected = errors.New("welcome rejected")
	// ErrHeld is wrapped by every decision to keep a Welcome for a later
	// attempt.
	ErrHeld = errors.New("welcome held")
)

// Rejection is a terminal refusal of a Welcome (JOIN-048): Rule names the
// requirement it failed and Err says what was wrong.
type Rejection struct {
	Rule string
	Err  error
	// plaintext marks a refusal of what a wrapper or pointee AEAD
	// returned, before the MLS Welcome authenticated it: when a plugin
	// returned it, the plugin may be at fault (COMP-272).
	plaintext bool
}

func (r *Rejection) Error() string { return fmt.Sprintf("welcome rejected (%s): %v", r.Rule, r.Err) }

// Unwrap returns [ErrRejected] and the cause.
func (r *Rejection) Unwrap() []error { return []error{ErrRejected, r.Err} }

// HoldKind says why a Welcome is held and what ends the hold.
type HoldKind int

const (
	// HoldUnreadable is JOIN-087 and JOIN-084: an unsupported value or
	// missing key material; the deadline is 1 day from the first such
	// result.
	HoldUnreadable HoldKind = iota + 1
	// HoldPointee is JOIN-094: a well-formed pointer whose pointee cannot
	// be retrieved; the deadline is an unreadable hold's, or 3 days after
	// the pointer's timestamp.
	HoldPointee
	// HoldVersion is JOIN-057: the group needs a later client; no
	// deadline, an upgrade makes it joinable.
	HoldVersion
	// HoldRemoval is JOIN-092: the group is active here and the commit
	// that removed this installation has not been processed yet.
	HoldRemoval
	// HoldRetry is JOIN-085: a local operation failed.
	HoldRetry
	// HoldPending is COMP-447: the commit at the Welcome's anchor is
	// pending its acceptance (two phases); the acceptance notice ends
	// the hold (the delivery service expires a pending commit itself).
	HoldPending
)

// Hold keeps a Welcome for a later attempt; Rule names the requirement.
type Hold struct {
	Kind HoldKind
	Rule string
	Err  error
	// plaintext marks a hold for what a wrapper or pointee AEAD returned,
	// before the MLS Welcome authenticated it (COMP-272).
	plaintext bool
}

func (h *Hold) Error() string { return fmt.Sprintf("welcome held (%s): %v", h.Rule, h.Err) }

// Unwrap returns [ErrHeld] and the cause.
func (h *Hold) Unwrap() []error { return []error{ErrHeld, h.Err} }

func reject(rule, format string, args ...any) error {
	return &Rejection{Rule: rule, Err: fmt.Errorf(format, args...)}
}

// unreadable is reject for a plaintext that cannot be read as what it
// should be, before MLS authenticated it (COMP-272).
func unreadable(rule, format string, args ...any) error {
	return &Rejection{Rule: rule, Err: fmt.Errorf(format, args...), plaintext: true}
}

// plaintextRefusal reports a rejection or hold of what a wrapper or
// pointee AEAD returned, before MLS authenticated it.
func plaintextRefusal(err error) bool {
	var rej *Rejection
	var hd *Hold
	return (errors.As(err, &rej) && rej.plaintext) || (errors.As(err, &hd) && hd.plaintext)
}

func hold(kind HoldKind, rule, format string, args ...any) error {
	return &Hold{Kind: kind, Rule: rule, Err: fmt.Errorf(format, args...)}
}

// local marks a failure that is not a property of the Welcome (JOIN-085).
func local(err error) error {
	return &Hold{Kind: HoldRetry, Rule: "JOIN-085", Err: err}
}
