// Package recovery repairs forked conversations: it implements sections 6
// to 8 of the fork-recovery specification — readd requests, the one-shot
// groups that carry them, the readd commit and the recovery policy — and
// one opt-in repair the specification leaves out, over the ports only.
//
// A client runs one [Recovery]. The recovery decides; the client that
// runs it acts, through the small [Host] contract: it processes a group's
// topic in order, runs an own commit to its end, and sends a one-shot
// group. The recovery keeps its state in [ports.Readds], in the caller's
// store, so a restart loses no request and answers none twice.
//
// # Requests
//
// When a conversation's fork state is forked and the [Policy] selects it,
// [Recovery.Request] records a request and then sends one ReaddRequest —
// the group id and the highest commit sequence id among the accepted
// remote entries — as the ONESHOT_MESSAGE of a new one-shot group whose
// members are the conversation's permitted readders (FORK-050). No second
// request is sent until a Welcome replaces the conversation's state
// (FORK-051); a send that certainly reached nobody is retried after
// Options.RetryDelay, one whose outcome is unknown never is.
//
// [Recovery.OnOneshot] receives the one-shot Welcomes the join code hands
// over (FORK-052) and keeps a request only when the conversation is
// allowed and the Welcome's adder is a leaf of this installation's tree
// of the group (FORK-053).
//
// # Responses
//
// [Recovery.Respond] answers the requests it keeps: after processing the
// group's topic to the highest sequence id the delivery service reports,
// only while the conversation is allowed, its state active, this inbox a
// permitted readder and its fork state not forked; an unknown state, or a
// request ahead of what was processed, waits (FORK-080). It raises the
// minimum protocol version to 1.6.0 first when it is lower or absent
// (FORK-063), then publishes one commit that removes the requester's leaf
// and adds the installation back with its newest valid key package
// (FORK-061, FORK-062). [Recovery.Readded], called by the client for
// every readd commit it merges, whoever published it, records the
// commit's sequence id so a request made before it is answered once
// (FORK-064). Responses can be switched off (FORK-071).
//
// # Repairing diverged secrets
//
// A member whose epoch secrets diverged cannot verify the readd commit
// that removes it, so its state stays active and JOIN-042 refuses the
// repair Welcome. With Policy.RepairDiverged, [Recovery.RepairForked]
// lets such a Welcome replace the state of a forked conversation when
// this installation asked to be readded and the Welcome's adder is a
// permitted readder in its own view of the group (COMP-205 in
// docs/companion-spec.md gives the security argument).
//
// # Errors
//
// [New] fails with an error wrapping [ErrConfig]. [Host.SendOneshot]
// reports a send that certainly reached nobody with an error wrapping
// [ErrNotSent]. A discarded request is a [*join.Rejection] naming the
// rule. Passes return local failures (storage, transport) joined; a
// request that cannot be answered yet stays stored for the next pass.
package recovery
