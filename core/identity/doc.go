// Package identity is regroup's identity layer (companion specification
// section 8): inboxes, the installations they associate, the signed
// identity updates that change them, and the association state a client
// resolves an inbox to at an exact identity sequence id (JOIN-051,
// JOIN-059, JOIN-095).
//
// An inbox is named by the SHA-256 of its recovery Ed25519 public key
// (COMP-070). Its identity-update topic (kind 0x02) carries updates that
// add an installation, signed by the new installation key and authorised
// by the recovery key or by an installation the inbox associates at that
// point (COMP-260), or revoke one, signed by the recovery key (COMP-071).
// [VerifyUpdate] checks one update; [Fold] computes association state from
// an inbox's updates; [Resolver] implements [ports.Identity] over a
// [ports.Store] (the cache) and a [ports.Transport] (the topic), and
// [ports.BatchIdentity]: [Resolver.AssociationStates] resolves many
// inboxes in one pass (COMP-130), reading and storing the cache of all
// of them with one call each when the store's identity cache implements
// [ports.IdentityCacheBatch] (COMP-587).
//
// [CreateInbox], [AddInstallation], [RequestInstallation], [Authorize]
// and [Revoke] create and change an identity; this installation's private
// keys are kept in the store's blobs (COMP-122), so [Load] finds them
// after a restart. The recovery key is not: [CreateInbox] hands it out
// once and [Revoke] takes it from the caller (COMP-261). [Load] reads
// identities stored before that too, and [ExportRecoveryKey] moves their
// stored recovery key out (COMP-262).
//
// # Errors
//
// An update that fails verification wraps [ErrInvalidUpdate] and names
// the failed check. [Revoke] without a recovery key wraps
// [ErrNoRecoveryKey], with another inbox's [ErrWrongRecoveryKey]. [Load] on a store holding no identity wraps
// [ErrNoIdentity], which wraps [ports.ErrNotFound]. [Resolver] answers
// with errors wrapping [ports.ErrNotFound] (no update at the requested
// sequence id, after fetching) or [ports.ErrUnavailable] (the fetch failed
// for the whole retry window); storage failures are returned as they are.
// [Resolver.AssociationStates] gives those answers per request and fails
// as a whole only for a storage failure or an ended ctx.
package identity
