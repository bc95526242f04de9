// Package mlstesthook holds the test-only hooks of the MLS engine
// (adapters/mls): ways a hostile test client (internal/hostile) makes the
// real engine build a commit an honest engine never builds. It is
// internal to the module; nothing outside tests sets a hook, and an unset
// hook changes nothing.
package mlstesthook

import "sync/atomic"

// PathFilter decides, for a commit's UpdatePath, whether the path secret
// encrypted to a resolution node is the real one: groupID names the
// group, committer is the committing leaf's index, node the recipient's
// node index (a leaf's is twice its leaf index). When it returns false the
// engine encrypts a random secret of the same length instead, which the
// recipient decrypts but which leads it to another key (selective
// encryption of path secrets).
type PathFilter func(groupID []byte, committer, node uint32) bool

var pathFilter atomic.Pointer[PathFilter]

// SetPathFilter installs f (nil removes it) and returns a function that
// restores the previous one.
func SetPathFilter(f PathFilter) (restore func()) {
	var p *PathFilter
	if f != nil {
		p = &f
	}
	old := pathFilter.Swap(p)
	return func() { pathFilter.Store(old) }
}

// RealPathSecret reports whether the path secret to node is the real one:
// true unless a filter says otherwise.
func RealPathSecret(groupID []byte, committer, node uint32) bool {
	if f := pathFilter.Load(); f != nil {
		return (*f)(groupID, committer, node)
	}
	return true
}
