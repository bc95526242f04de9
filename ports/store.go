package ports

import (
	"context"
	"errors"
	"time"
)

// ErrDeadlineLater reports a [HeldWelcomes.Update] that would clear a held
// Welcome's set deadline or move it later, which JOIN-063 forbids.
var ErrDeadlineLater = errors.New("held welcome deadline moved later")

// Store is the durable state of one client installation. Every rule of the
// specs that says "survives a restart", "atomically", "at most once" or "is
// never lost" is kept by running its reads and writes inside one Tx.
//
// Every repository keeps its own copy of what it is given and returns
// copies: no slice or map a caller passes or receives shares memory with
// the store. Times come back as the instants they were given, at
// microsecond precision, whatever their location. Keys, ids and prefixes
// compare as bytes.
//
// Later capabilities arrive as optional interfaces on [Tx], or on the
// repository they extend ([IdentityCacheBatch]), detected with a type
// assertion, so an adapter written today keeps compiling.
type Store interface {
	// Tx runs fn inside one database transaction. When fn returns nil the
	// transaction commits and Tx returns the commit's error; when fn returns
	// an error or panics, nothing fn wrote is kept, and Tx returns fn's error
	// (or re-panics). A transaction that loses a race with a concurrent one
	// is either retried by Tx from the start (fn must therefore be safe to
	// run more than once) or reported as an error wrapping [ErrConflict].
	// A cancelled ctx aborts the transaction with ctx's error.
	Tx(ctx context.Context, fn func(tx Tx) error) error
	// Close releases the store. Calls after Close return [ErrClosed].
	Close() error
}

// Tx hands out the repositories of one transaction. A repository must not
// be used after its transaction has ended.
type Tx interface {
	Groups() Groups
	LocalCommitLog() LocalCommitLog
	RemoteCommitLog() RemoteCommitLog
	PublishProgress() PublishProgress
	ReaderAdmission() ReaderAdmission
	KeyPackages() KeyPackages
	HeldWelcomes() HeldWelcomes
	Readds() Readds
	ProcessedEnvelopes() ProcessedEnvelopes
	IdentityCache() IdentityCache
	Blobs() Blobs
}

// ConversationType is a group's immutable conversation type (companion
// definitions: the 0xBFFF component).
type ConversationType int32

const (
	ConversationGroup   ConversationType = 1
	ConversationDM      ConversationType = 2
	ConversationSync    ConversationType = 3
	ConversationOneshot ConversationType = 4
)

// ConsentState is the user's consent for a conversation (CONS section 1).
type ConsentState int32

const (
	ConsentUnknown ConsentState = 0
	ConsentAllowed ConsentState = 1
	ConsentDenied  ConsentState = 2
)

// ForkState is a conversation's fork state (fork-recovery section 5). The
// zero value is unknown.
type ForkState int32

const (
	ForkUnknown   ForkState = 0
	ForkNotForked ForkState = 1
	ForkForked    ForkState = 2
)

// String returns "unknown", "not forked" or "forked".
func (s ForkState) String() string {
	switch s {
	case ForkNotForked:
		return "not forked"
	case ForkForked:
		return "forked"
	}
	return "unknown"
}

// Group is what the client records about a conversation beside its MLS
// state.
type Group struct {
	// ID is the MLS group id, 16 or 32 bytes.
	ID               []byte
	ConversationType ConversationType
	// DMID is the dm id of a DM under DMS-001, empty otherwise.
	DMID    string
	Consent ConsentState
	// Active reports whether this installation is a member in its MLS state;
	// false after it applied a commit that removed it.
	Active bool
	// Cursor is the stored cursor on the group's message topic: the
	// sequence id of the last envelope processed (PROC-005).
	Cursor uint64
	// JoinAnchor is the message_cursor of the Welcome that installed the
	// current membership, 0 for a group this installation created.
	JoinAnchor uint64
	// Membership counts installations of this group's state (creation, a
	// Welcome, an archive restore); local entries carry the membership they
	// were recorded in, and only the current one's are compared.
	Membership uint64
	// GroupRoot is the 32-byte group root (companion definitions), nil for a
	// restored placeholder.
	GroupRoot []byte
	ForkState ForkState
	// MaybeForked is the diagnostic of FORK-073, with the reason it was set.
	MaybeForked       bool
	MaybeForkedReason string
	// MinProtocolVersion is the group's minimum protocol version component,
	// empty when absent.
	MinProtocolVersion string
	// RestoredPlaceholder marks a group restored from an archive without MLS
	// state (ARCH-015).
	RestoredPlaceholder bool
	CreatedAt           time.Time
	UpdatedAt           time.Time
}

// GroupFilter selects groups in [Groups.List]; zero fields do not filter.
type GroupFilter struct {
	Consent          *ConsentState
	ConversationType *ConversationType
	Active           *bool
}

// Groups stores [Group] records keyed by group id.
type Groups interface {
	// Get returns the group, or an error wrapping [ErrNotFound].
	Get(ctx context.Context, id []byte) (Group, error)
	// Insert stores a new group. It returns an error wrapping
	// [ErrAlreadyExists] when a group with that id exists, even with
	// identical contents.
	Insert(ctx context.Context, g Group) error
	// Update reads the group, passes it to fn and writes back what fn left,
	// in this transaction. fn's error aborts the update, writes nothing and
	// is returned. It returns an error wrapping [ErrNotFound], without
	// calling fn, when there is no such group. The ID cannot be changed: an
	// fn that changes it makes Update fail or is ignored, and the group
	// stays under id.
	Update(ctx context.Context, id []byte, fn func(g *Group) error) error
	// List returns the groups the filter selects, ordered by id.
	List(ctx context.Context, f GroupFilter) ([]Group, error)
}

// CommitResult is a commit outcome, with the wire values of
// xmtp.mls.message_contents.CommitResult.
type CommitResult int32

const (
	CommitResultUnspecified   CommitResult = 0
	CommitResultApplied       CommitResult = 1
	CommitResultWrongEpoch    CommitResult = 2
	CommitResultUndecryptable CommitResult = 3
	CommitResultInvalid       CommitResult = 4
)

// ChangeClass is the recorded classification of an applied commit, used to
// find unresolved role commits in legacy local history (FORK-086).
type ChangeClass int32

const (
	// ChangeUnknown is an absent or unrecognized classification.
	ChangeUnknown ChangeClass = 0
	// ChangeKeyUpdate is a commit confined to a key update.
	ChangeKeyUpdate ChangeClass = 1
	// ChangeMetadata is a commit confined to non-role metadata.
	ChangeMetadata ChangeClass = 2
	// ChangeMembership changes group membership.
	ChangeMembership ChangeClass = 3
	// ChangePermissions changes permissions or administrator lists.
	ChangePermissions ChangeClass = 4
)

// LocalCommitLogEntry is one local commit-log entry (fork-recovery
// section 1) with what the store adds to keep it ordered.
type LocalCommitLogEntry struct {
	GroupID []byte
	// Seq is the entry's position in local recording order, assigned by the
	// store on Append: 1 for a group's first entry, strictly increasing.
	Seq                       uint64
	Membership                uint64
	CommitSequenceID          uint64
	LastEpochAuthenticator    []byte
	CommitResult              CommitResult
	AppliedEpochNumber        uint64
	AppliedEpochAuthenticator []byte
	RemovedThisInstallation   bool
	// Legacy marks an entry recorded before author-signed entries existed
	// (legacy local history, FORK-086).
	Legacy      bool
	ChangeClass ChangeClass
	// AddedSuperAdmins holds the inboxes the commit's retained GroupUpdated
	// evidence names as added super admins; nil when none was retained.
	AddedSuperAdmins []string
	// RoleEvidence reports whether retained role evidence exists and decodes
	// for this commit.
	RoleEvidence bool
	RecordedAt   time.Time
}

// LocalCommitLog stores local entries in recording order.
type LocalCommitLog interface {
	// Append records e and returns it with its assigned Seq. An entry with
	// the same group id, membership and commit sequence id as a stored one
	// is not recorded twice: Append returns the stored entry and
	// inserted = false (at most one entry per commit outcome).
	Append(ctx context.Context, e LocalCommitLogEntry) (stored LocalCommitLogEntry, inserted bool, err error)
	// List returns up to limit entries of the group with Seq > afterSeq in
	// ascending Seq order; limit <= 0 means no limit.
	List(ctx context.Context, groupID []byte, afterSeq uint64, limit int) ([]LocalCommitLogEntry, error)
	// Last returns the group's entry with the highest Seq, or an error
	// wrapping [ErrNotFound].
	Last(ctx context.Context, groupID []byte) (LocalCommitLogEntry, error)
	// ByCommit returns the group's entry of that membership for that commit
	// sequence id, or an error wrapping [ErrNotFound]. It costs one indexed
	// lookup, however long the log.
	ByCommit(ctx context.Context, groupID []byte, membership, commitSequenceID uint64) (LocalCommitLogEntry, error)
}

// RemoteCommitLogEntry is an accepted entry: one read from the commit-log
// topic and kept under FORK-077, FORK-087 and FORK-083.
type RemoteCommitLogEntry struct {
	GroupID []byte
	// EnvelopeSequenceID is the entry's sequence id on the commit-log topic.
	EnvelopeSequenceID        uint64
	CommitSequenceID          uint64
	LastEpochAuthenticator    []byte
	CommitResult              CommitResult
	AppliedEpochNumber        uint64
	AppliedEpochAuthenticator []byte
	AuthorInstallationKey     []byte
	AcceptedAt                time.Time
}

// RemoteCommitLog stores accepted entries and the read position of each
// conversation's commit-log topic.
type RemoteCommitLog interface {
	// Insert stores an accepted entry. Inserting the same envelope sequence
	// id of a group twice stores it once and returns inserted = false.
	Insert(ctx context.Context, e RemoteCommitLogEntry) (inserted bool, err error)
	// List returns up to limit accepted entries of the group with envelope
	// sequence id > after, ascending; limit <= 0 means no limit.
	List(ctx context.Context, groupID []byte, after uint64, limit int) ([]RemoteCommitLogEntry, error)
	// Last returns the accepted entry with the highest envelope sequence id,
	// or an error wrapping [ErrNotFound].
	Last(ctx context.Context, groupID []byte) (RemoteCommitLogEntry, error)
	// ReadPosition returns the sequence id of the last commit-log envelope
	// the client evaluated for the group, 0 when none.
	ReadPosition(ctx context.Context, groupID []byte) (uint64, error)
	// SetReadPosition records the last evaluated envelope. It never moves the
	// position backwards: a lower value is ignored.
	SetReadPosition(ctx context.Context, groupID []byte, seq uint64) error
	// ByCommit returns the accepted entry with that commit sequence id (the
	// one with the lowest envelope sequence id when several are stored), or
	// an error wrapping [ErrNotFound]. It costs one indexed lookup.
	ByCommit(ctx context.Context, groupID []byte, commitSequenceID uint64) (RemoteCommitLogEntry, error)
	// Rewind withdraws what a read position the topic no longer backs let
	// in: it removes the group's accepted entries whose envelope sequence id
	// is greater than bound, then sets the read position to the highest
	// envelope sequence id of the accepted entries left (0 when none), lower
	// than before if need be. It returns the new position and how many
	// entries it removed.
	Rewind(ctx context.Context, groupID []byte, bound uint64) (pos uint64, removed int, err error)
	// Comparison returns the group's stored [ForkComparison]; ok is false
	// when none was ever stored.
	Comparison(ctx context.Context, groupID []byte) (c ForkComparison, ok bool, err error)
	// PutComparison stores c, replacing the group's.
	PutComparison(ctx context.Context, c ForkComparison) error
}

// ForkComparison is what a conversation's fork state (fork-recovery
// section 5) is computed from, kept current as entries are recorded and
// accepted so that no pass re-reads either log: the newest shared commit
// and the newest local commit of one membership.
type ForkComparison struct {
	GroupID []byte
	// Membership is the membership the two values below describe.
	Membership uint64
	// Shared is the highest commit sequence id at which both a local entry
	// of the membership, other than a removal entry, and an accepted entry
	// exist; 0 when there is none.
	Shared uint64
	// NewestLocal is the highest commit sequence id of a local entry of the
	// membership other than a removal entry; 0 when there is none.
	NewestLocal uint64
}

// PublishState is a conversation's publication progress (FORK-021,
// FORK-085, FORK-086).
type PublishState struct {
	GroupID []byte
	// ConfirmedThrough is the Seq of the last local entry whose publish the
	// backend confirmed with a sequence id greater than 0; entries up to it
	// are never published again.
	ConfirmedThrough uint64
	// EligibleFrom is the lowest local Seq eligible for publication under the
	// current role (FORK-085): entries before it are never published.
	EligibleFrom uint64
	// LegacyRecovered reports that FORK-086's one-time recovery has run.
	LegacyRecovered bool
	// Publisher is whether the client was a publisher when last evaluated,
	// so that becoming one again can be detected.
	Publisher bool
}

// PublishProgress stores [PublishState] per conversation.
type PublishProgress interface {
	// Get returns the group's state, or an error wrapping [ErrNotFound].
	Get(ctx context.Context, groupID []byte) (PublishState, error)
	// Put stores the group's state, replacing what was there.
	Put(ctx context.Context, s PublishState) error
}

// ReaderAdmission stores the legacy reader epoch floor (FORK-088) and the
// publisher boundaries (FORK-089) of each conversation.
type ReaderAdmission interface {
	// Floor returns the legacy reader epoch floor; ok is false when it was
	// never initialized (zero is an initialized value).
	Floor(ctx context.Context, groupID []byte) (floor uint64, ok bool, err error)
	// SetFloor initializes or resets the floor.
	SetFloor(ctx context.Context, groupID []byte, floor uint64) error
	// Boundaries returns the publisher boundary of every installation key
	// recorded for the group, keyed by the key's bytes as a string.
	Boundaries(ctx context.Context, groupID []byte) (map[string]uint64, error)
	// RaiseBoundary sets the installation's boundary to seq if that is
	// higher than the recorded one (FORK-089 takes a maximum).
	RaiseBoundary(ctx context.Context, groupID, installationKey []byte, seq uint64) error
	// ResetBoundaries removes every boundary of the group and records
	// initial for each installation key given (a new membership).
	ResetBoundaries(ctx context.Context, groupID []byte, initial map[string]uint64) error
}

// KeyPackageRecord is one key package this installation generated, its
// private material, and its publication history (joining-groups sections
// 1 to 3).
type KeyPackageRecord struct {
	// Ref is the KeyPackageRef (RFC 9420 §5.2).
	Ref []byte
	// KeyPackage is the TLS-serialized public key package.
	KeyPackage       []byte
	WrapperAlgorithm int32
	WrapperPublicKey []byte
	// Private material; all three are erased together on Destroy (JOIN-019).
	InitPrivateKey       []byte
	EncryptionPrivateKey []byte
	WrapperPrivateKey    []byte
	CreatedAt            time.Time
	NotAfter             time.Time
	// PublishSequenceID is the sequence id the backend's publish response
	// carried, 0 while none has.
	PublishSequenceID uint64
	// PublishConfirmedAt is when that response arrived.
	PublishConfirmedAt time.Time
	// PublishRefused marks a package the backend refused with
	// INVALID_ARGUMENT (JOIN-020).
	PublishRefused bool
	// DestroyedAt is when the private material was destroyed, zero if not.
	DestroyedAt time.Time
}

// KeyPackages stores [KeyPackageRecord]s.
type KeyPackages interface {
	// Insert stores a new record; a duplicate Ref wraps [ErrAlreadyExists],
	// even with identical contents.
	Insert(ctx context.Context, r KeyPackageRecord) error
	// Get returns the record with that ref, or an error wrapping [ErrNotFound].
	Get(ctx context.Context, ref []byte) (KeyPackageRecord, error)
	// ByWrapperPublicKey returns the record whose advertised wrapper public
	// key equals pub (JOIN-076), or an error wrapping [ErrNotFound].
	ByWrapperPublicKey(ctx context.Context, pub []byte) (KeyPackageRecord, error)
	// Update applies fn to the record, as [Groups.Update] does.
	Update(ctx context.Context, ref []byte, fn func(r *KeyPackageRecord) error) error
	// List returns every record in creation order: CreatedAt ascending as
	// instants (whatever their location), then Ref.
	List(ctx context.Context) ([]KeyPackageRecord, error)
	// Destroy erases the three private keys of the record and stamps
	// DestroyedAt; the public part and history stay. Destroying twice is not
	// an error; destroying an absent ref wraps [ErrNotFound].
	Destroy(ctx context.Context, ref []byte, at time.Time) error
}

// HeldWelcome is a received Welcome (or welcome pointer) the client has not
// completed or rejected.
type HeldWelcome struct {
	// SequenceID is the envelope's sequence id on this installation's
	// welcome topic; it identifies the Welcome.
	SequenceID uint64
	// Envelope is the stored envelope exactly as received, unknown fields
	// included.
	Envelope        []byte
	ServerTimestamp time.Time
	// FirstSeenAt is when the client first encountered it.
	FirstSeenAt time.Time
	// Deadline is when the hold ends, zero while none applies. It is set
	// once and never moved later (JOIN-063).
	Deadline time.Time
	// Reason is why the Welcome is held, for diagnostics.
	Reason   string
	Attempts int
	// GroupID is the group the Welcome names, once known.
	GroupID []byte
}

// HeldWelcomes stores [HeldWelcome]s until they are completed or rejected.
type HeldWelcomes interface {
	// Put stores w unless a Welcome with its sequence id is held already, in
	// which case the stored one is kept and inserted is false.
	Put(ctx context.Context, w HeldWelcome) (inserted bool, err error)
	// Get returns the held Welcome, or an error wrapping [ErrNotFound].
	Get(ctx context.Context, seq uint64) (HeldWelcome, error)
	// Update applies fn to the held Welcome. An update that moves a set
	// Deadline later, or clears it, is refused with an error wrapping
	// [ErrDeadlineLater] and nothing is written (JOIN-063).
	Update(ctx context.Context, seq uint64, fn func(w *HeldWelcome) error) error
	// List returns held Welcomes in sequence id order.
	List(ctx context.Context) ([]HeldWelcome, error)
	// Delete removes a completed or rejected Welcome. Deleting an absent one
	// is not an error.
	Delete(ctx context.Context, seq uint64) error
	// Count returns how many Welcomes are held (JOIN-018 checks for none).
	Count(ctx context.Context) (int, error)
}

// ReaddStatus is what a client knows of readd requests and readd commits
// for one installation of one group (fork-recovery sections 6 and 7).
type ReaddStatus struct {
	GroupID         []byte
	InstallationKey []byte
	// RequestedAt is the latest_commit_sequence_id of the request held or
	// sent; valid when Requested is true.
	Requested   bool
	RequestedAt uint64
	// RespondedAt is the commit sequence id of the newest readd commit
	// applied for this installation, 0 when none (FORK-064).
	RespondedAt uint64
	// NotBefore defers the next readd attempt (FORK-062).
	NotBefore time.Time
	UpdatedAt time.Time
}

// Readds stores [ReaddStatus] per group and installation.
type Readds interface {
	// Get returns the status, or an error wrapping [ErrNotFound].
	Get(ctx context.Context, groupID, installationKey []byte) (ReaddStatus, error)
	// Upsert reads the status (the zero status with the two keys set when
	// absent), applies fn and stores the result.
	Upsert(ctx context.Context, groupID, installationKey []byte, fn func(s *ReaddStatus) error) error
	// ListRequested returns every status with Requested set, ordered by
	// group id then installation key.
	ListRequested(ctx context.Context) ([]ReaddStatus, error)
}

// ProcessedEnvelopes marks envelopes whose effects were applied, so that
// redelivery applies them at most once (JOIN-045).
type ProcessedEnvelopes interface {
	// Mark records the envelope; first is false when it was already marked.
	Mark(ctx context.Context, topic []byte, seq uint64) (first bool, err error)
	// Has reports whether the envelope was marked.
	Has(ctx context.Context, topic []byte, seq uint64) (bool, error)
}

// IdentityUpdateRecord is one identity update held for an inbox.
type IdentityUpdateRecord struct {
	InboxID    string
	SequenceID uint64
	// Update is the serialized IdentityUpdate.
	Update []byte
}

// IdentityCache stores identity updates fetched for inboxes.
type IdentityCache interface {
	// Put stores the update; storing the same inbox and sequence id again
	// keeps the first and returns inserted = false.
	Put(ctx context.Context, r IdentityUpdateRecord) (inserted bool, err error)
	// List returns the inbox's updates with sequence id <= through,
	// ascending.
	List(ctx context.Context, inboxID string, through uint64) ([]IdentityUpdateRecord, error)
	// Highest returns the highest sequence id held for the inbox, 0 when
	// none.
	Highest(ctx context.Context, inboxID string) (uint64, error)
}

// IdentityCacheBatch is an optional interface of an [IdentityCache]: the
// updates of many inboxes read, and many updates stored, in a few
// statements rather than one per inbox or per update (COMP-585). Callers
// detect it with a type assertion on the repository a [Tx] hands out and
// fall back to [IdentityCache.List] and [IdentityCache.Put]; a decorator
// that wraps an IdentityCache forwards it, or its callers fall back.
type IdentityCacheBatch interface {
	// ListMany returns, for each inbox in order, every update held for
	// it, ascending by sequence id: what List of that inbox through
	// 2^63-1 returns. An inbox with none gets an empty list; an inbox
	// named twice gets its list twice, in slices that share no memory.
	ListMany(ctx context.Context, inboxIDs []string) ([][]IdentityUpdateRecord, error)
	// PutMany stores the records and returns, for each in order, what
	// Put of each in turn returns: inserted = false for a record whose
	// inbox and sequence id the store held already or an earlier record
	// of the call names, and then the first record stays. A record Put
	// refuses fails the whole call before anything is stored.
	PutMany(ctx context.Context, records []IdentityUpdateRecord) (inserted []bool, err error)
}

// Blobs stores opaque values under a namespace and key; the MLS engine
// keeps its state here so the caller's transaction covers it.
type Blobs interface {
	// Get returns the value, or an error wrapping [ErrNotFound].
	Get(ctx context.Context, namespace, key string) ([]byte, error)
	// Put stores the value, replacing what was there.
	Put(ctx context.Context, namespace, key string, value []byte) error
	// Delete removes the value; deleting an absent one is not an error.
	Delete(ctx context.Context, namespace, key string) error
	// Keys returns the keys in the namespace that start with prefix, in
	// ascending byte order. Namespaces, keys and prefixes compare as bytes:
	// no character is a wildcard, and no collation applies.
	Keys(ctx context.Context, namespace, prefix string) ([]string, error)
}
