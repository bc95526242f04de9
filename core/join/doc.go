// Package join sends and receives Welcomes: it implements sections 4 to 9
// of the joining-groups specification over the ports only.
//
// [Sender] wraps the Welcome of a commit for every installation it added,
// inline or through one pointee and welcome pointers (JOIN-091, JOIN-071,
// JOIN-029, JOIN-030, JOIN-065, JOIN-078).
//
// [Receiver] reads this installation's welcome topic. Every envelope is
// first stored as a held Welcome ([ports.HeldWelcomes]), so a Welcome
// survives a restart and keeps key material alive until it is completed
// or rejected (JOIN-018), and is attempted as it is read; the held queue
// is bounded per sender class and in all (COMP-253). The durable read
// position moves only over Welcomes whose GroupInfo signature a verified
// member made, so junk at extreme sequence ids, even sealed to a fetched
// key package, cannot hide later Welcomes (COMP-250, COMP-290); a daily
// re-read from a low-water mark bounds what a Welcome from an inbox the
// operator controls can hide (COMP-291). Each attempt runs the pipeline in the order the
// specification gives: unwrap (JOIN-076, JOIN-026, JOIN-027), pointers
// (JOIN-032, JOIN-056, JOIN-033, JOIN-094, JOIN-035, JOIN-064), the
// anchor (JOIN-036, JOIN-037, JOIN-038), the conversation identity
// (JOIN-089), replacement (JOIN-092, JOIN-042, JOIN-043, JOIN-080), the
// asserted membership (JOIN-049 to JOIN-054, JOIN-059, JOIN-095), the
// group (JOIN-060, JOIN-057, JOIN-058, JOIN-083) and the adder
// (JOIN-025). The install is one transaction (JOIN-046, JOIN-044,
// JOIN-045).
//
// # Outcomes
//
// Every attempt ends in exactly one of: installed (or, for a one-shot
// group, handed to [ReceiverOptions.OnOneshot]); held until a deadline
// that never moves later (JOIN-087, JOIN-084, JOIN-094, JOIN-063), or
// without one while it waits for an upgrade (JOIN-057) or the removal
// commit (JOIN-092); kept for a retry because a local operation failed
// (JOIN-085); or terminally rejected with a recorded reason (JOIN-048),
// listed by [Receiver.Rejected].
//
// # Errors
//
// A terminal refusal is a [*Rejection], which wraps [ErrRejected] and the
// cause; a hold is a [*Hold], which wraps [ErrHeld]. Both name the rule.
// [Receiver.Process] and [Receiver.RetryHeld] return only local failures
// (storage, transport): a Welcome's own defects are outcomes, not errors.
// [Sender.Envelopes] wraps [ErrSend].
package join
