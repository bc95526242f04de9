// Package mls is regroup's pure-Go RFC 9420 engine behind [ports.MLS],
// with the optional [ports.MLSPendingCommits], [ports.MLSWelcomes],
// [ports.MLSExternal] and [ports.MLSSelfRemove]. It implements all seven
// cipher suites of RFC 9420 §17.1. [NewPublicGroups] is the validator of
// [ports.PublicGroups]: a group's public state, without secrets, followed
// commit by commit (COMP-309 to COMP-313).
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
// Keyed by hex group id: namespace "mls.group" holds the head of each
// group's current state — everything but the ratchet tree's nodes, which
// "mls.tree" holds in blocks of up to 31 nodes keyed by hex group id "."
// block id (group state version 3, [group.Group.MarshalSplit]); a commit
// rewrites the head and the few blocks its path crosses, not the whole
// tree. A head names every block with the random tag of the write that
// stored it, so parts of different writes never load together. A state
// written by an engine that kept one blob per group (version 2) loads as
// it is and is stored in parts at its next write. "mls.staged" holds the
// commit staged by the last Process, "mls.pending" this installation's
// pending commit, each as its changes to the stored state it was built on;
// "mls.external" holds this installation's pending external commit and
// "mls.staged.external" that commit once Process read it back, each whole,
// and "mls.removal" the removal record of an inactive group. "mls.welcome"
// holds the Welcomes staged by StageWelcome, keyed by handle (hex group
// id, epoch and Welcome hash) with a write tag, their staging time and
// GroupInfo signer; a blob there that is a bare version-2 group state
// under a random handle was staged by an engine that kept no more, and
// loads with both unknown. The blobs hold secrets; the store is trusted
// with them.
//
// Every read and write goes through the caller's transaction. An engine
// keeps recently read and written states decoded (Options.CacheBytes),
// keyed by the tag of the write that stored them; it reads the head from
// the transaction first and uses a kept state only for the tag that head
// carries. A write rolled back or retried, a transaction not yet
// committed, another Engine value or another process using the same store
// therefore never make it serve a state the transaction does not see. A
// staged Welcome's kept state comes with the parts it is stored as, so
// that InstallWelcome reads only the staged blob's header, with its tag,
// when the transaction's Blobs read prefixes ([ports.BlobPrefixReader]),
// and stores those parts (COMP-573).
//
// # Errors
//
// Process fails with exactly one of ports.ErrWrongEpoch (as a
// *ports.WrongEpochError), ports.ErrUndecryptable or ports.ErrInvalid,
// inside a *ports.ProcessError when the message names an epoch; on a group
// this installation was removed from each also wraps ports.ErrInactive.
// StageWelcome fails with ports.ErrUnsupported for a Welcome in a version,
// suite or extension the key package does not advertise. CreateGroup and
// InstallWelcome over held state fail with ports.ErrAlreadyExists.
// Storage failures are returned unchanged.
package mls
