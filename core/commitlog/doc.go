// Package commitlog implements the commit log of fork-recovery sections 1
// to 5: the local entries a client records for each commit outcome, the
// keys and seals of published entries, publication in order with retries,
// reading and admitting remote entries, and the fork state that compares
// the two logs.
//
// It reaches storage, the delivery service and time only through
// [ports.Store], [ports.Transport] and [ports.Clock], and reads group state
// only as [ports.GroupView] values from a [Views] source (ports.MLS
// satisfies it).
//
// # Recording
//
// The client's ordered topic processing calls [Log.RecordMerge] when it
// merges a commit and [Log.RecordFailure] when it records a terminal
// rejection, inside the transaction that advances the group's cursor; both
// bring the fork state up to date in that transaction and return a
// [Recorded], which the caller passes to [Log.Notify] after it commits.
// The join code calls [Log.BeginMembership] when it creates a group or
// installs a Welcome.
//
// # Publishing and reading
//
// A worker calls [Log.Publish] and [Log.Read] (or [Log.Sync], which reads
// whatever the publish did) per conversation. Discarded envelopes are
// counted per [Reason] ([Log.Counters]); a conversation becoming forked in
// a pass is reported to Options.OnForked after the pass's transaction
// commits.
//
// # Hostile input
//
// Everything a delivery service serves is input. Sequence ids are bounded
// by what the topic and the group's own topic have shown before they move
// the read position (COMP-099), a position the topics stop backing is
// rewound (COMP-100), and values no store holds are discarded before
// admission (COMP-101), so one envelope costs that envelope only. A pass
// costs in proportion to the envelopes it is served, not to history
// (COMP-103).
//
// # Errors
//
// Failures wrap one of [ErrNoCommitLog], [ErrDisabled], [ErrRejected],
// [ErrNotRecordable], [ErrPublish] or [ErrBadKey], or a ports sentinel
// from the store or transport.
package commitlog
