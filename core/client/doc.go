// Package client is regroup's SDK: one installation of one inbox taking
// part in MLS groups and DMs, detecting forks from the commit log and
// getting them repaired.
//
// A [Client] is built from its ports ([Deps]: store, MLS engine,
// transport, identity resolver, clock, algorithm registry) and [Options];
// applications usually let the root package's injectors build it
// (regroup.NewEmbedded, regroup.NewNetworked), on the integrator's own
// store if they like (regroup.EmbeddedConfig.Store). One store serves one
// running client.
//
// # Conversations
//
// [Client.CreateGroup] and [Client.CreateDM] start conversations;
// [Client.Conversation] and [Client.Conversations] find them. A
// [Conversation] sends and lists messages, changes its membership and
// metadata, and reports its fork state ([Conversation.ForkState]).
//
// # Processing
//
// [Client.SyncAll] processes every Welcome, and every group topic and
// commit log that moved (COMP-280), in sequence order from the stored
// cursors, and runs the fork repair; [Client.Start] runs the same work in the background, woken by
// subscriptions, and reports what happens on [Client.Events].
//
// # Forks
//
// Commits are recorded in a local commit log and published; the entries
// other members publish are compared with it, and a conversation whose
// logs diverge reads forked. [Options.Recovery] chooses whether this
// client asks to be readded to forked conversations, answers others'
// requests, and accepts the repair of diverged epoch secrets
// (docs/companion-spec.md, COMP-205).
//
// # Errors
//
// Errors wrap the ports sentinels (ports.ErrNotFound,
// ports.ErrUnavailable …) and this package's own, so that errors.Is
// classifies them.
package client
