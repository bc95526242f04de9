package main

import (
	"errors"

	"github.com/regroup-mls/regroup/ports"
)

// publicValidator returns the validator commit acceptance follows groups
// with: the built-in MLS engine's [ports.PublicGroups], which must also
// implement [ports.PublicStateViewer]. Tests replace it.
var publicValidator = func() (ports.PublicGroups, error) {
	return nil, errNoPublicValidator
}

// errNoPublicValidator is the start failure of -accept-commits in a build
// whose MLS engine offers no public validator.
var errNoPublicValidator = errors.New("this build's MLS engine offers no public validator (ports.PublicGroups)")
