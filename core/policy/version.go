package policy

import (
	"errors"
	"fmt"
	"slices"

	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
)

// Version is the role policy version this package implements: the rules
// of COMP-180 to COMP-183, COMP-244 to COMP-248 and the viewer role
// (COMP-387 to COMP-389). A group states the version its members judge
// commits by in the policy version component (0x8010, COMP-385).
const Version uint16 = 1

// LegacyVersion is the version of a group whose metadata carries no
// policy version component: every group created before the component
// existed was judged by the rules of version 1 (COMP-386).
const LegacyVersion uint16 = 1

// Versions are the role policy versions this package knows, oldest
// first. A group, commit or Welcome that states another one is refused
// (ADR-0030 Decision 8).
var Versions = []uint16{1}

// Known reports whether v is a role policy version this package knows.
func Known(v uint16) bool { return slices.Contains(Versions, v) }

// ErrUnknownVersion is wrapped by [*UnknownVersionError].
var ErrUnknownVersion = errors.New("unknown role policy version")

// UnknownVersionError is a group state that states a role policy version
// this package does not know: its members judge commits by rules this
// code does not have, so it can neither accept nor refuse them the way
// they do (ADR-0030 Decision 8).
type UnknownVersionError struct {
	Version uint16
}

func (e *UnknownVersionError) Error() string {
	return fmt.Sprintf("%v %d (this build knows %v)", ErrUnknownVersion, e.Version, Versions)
}

// Unwrap returns [ErrUnknownVersion].
func (e *UnknownVersionError) Unwrap() error { return ErrUnknownVersion }

// VersionOf returns the role policy version a group state states; a
// state without the component states [LegacyVersion]. A malformed
// component or dictionary wraps [metadata.ErrMalformed]; a version this
// package does not know is an [*UnknownVersionError].
func VersionOf(view ports.GroupView) (uint16, error) {
	d, err := metadata.FromExtensions(view.Extensions)
	if err != nil {
		return 0, fmt.Errorf("role policy version: %w", err)
	}
	v, ok, err := d.PolicyVersion()
	switch {
	case err != nil:
		return 0, err
	case !ok:
		return LegacyVersion, nil
	case !Known(v):
		return v, &UnknownVersionError{Version: v}
	}
	return v, nil
}

// checkVersions refuses a commit whose group states, before or after it,
// a role policy version this package does not know, or a malformed one.
func checkVersions(before, after ports.GroupView) error {
	if _, err := VersionOf(before); err != nil {
		return versionErr("before the commit", err)
	}
	if _, err := VersionOf(after); err != nil {
		return versionErr("after the commit", err)
	}
	return nil
}

func versionErr(when string, err error) error {
	var u *UnknownVersionError
	if errors.As(err, &u) {
		return fmt.Errorf("%s: %w", when, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrNotPermitted, when, err)
}
