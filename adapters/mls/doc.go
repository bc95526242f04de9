// Package mls is regroup's pure-Go RFC 9420 engine behind [ports.MLS].
//
// # Layout
//
// The protocol lives in subpackages named after RFC concepts: codec (§2.1),
// ciphersuite (§5), treemath (§4, Appendix C), message (§§7–12
// structures), framing (§6), keyschedule (§8), secrettree (§9),
// ratchettree (§7), treekem (§7.4–7.6), keypackage (§10), welcome
// (§12.4.3.1) and group (§12). This package adapts package group to the
// port: it keeps every group's state as a blob in the caller's
// transaction, so the engine's state and the caller's records commit or
// roll back together.
//
// # State
//
// Namespace "mls.group" holds the current state of each group (key: hex
// group id), "mls.staged" the commit staged by the last Process,
// "mls.pending" this installation's pending commit and "mls.welcome" the
// Welcomes staged by StageWelcome (key: the handle). The blobs hold
// secrets; the store is trusted with them.
//
// # Errors
//
// Process fails with exactly one of ports.ErrWrongEpoch (as a
// *ports.WrongEpochError), ports.ErrUndecryptable or ports.ErrInvalid;
// storage failures are returned unchanged.
package mls
