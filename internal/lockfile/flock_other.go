//go:build !unix && !windows

package lockfile

import (
	"errors"
	"os"
)

// tryLock has no advisory lock to take outside Unix: it reports an error
// rather than letting two clients run on one store unguarded.
func tryLock(*os.File) (bool, error) {
	return false, errors.New("exclusive store locks are implemented on Unix only")
}

func unlock(*os.File) error { return nil }
