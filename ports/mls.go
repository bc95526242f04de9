package ports

import (
	"context"
	"time"
)

// Extension is an MLS extension (RFC 9420 §13.4): its type and the
// extension_data bytes.
type Extension struct {
	Type uint16
	Data []byte
}

// Capabilities are the capabilities a leaf node advertises (RFC 9420
// §7.2), as the code points the leaf lists, in its order.
type Capabilities struct {
	Versions     []uint16
	CipherSuites []uint16
	Extensions   []uint16
	Proposals    []uint16
	Credentials  []uint16
}

// Member is one leaf of a group's ratchet tree.
type Member struct {
	LeafIndex uint32
	// SignatureKey is the leaf node's signature_key: the installation key.
	SignatureKey []byte
	// InboxID is the inbox the leaf's MlsCredential names; empty when the
	// credential is not a basic credential holding an MlsCredential.
	InboxID string
	// CredentialType is the leaf's credential_type (1 for basic) and
	// Credential its identity bytes, as the leaf carries them.
	CredentialType uint16
	Credential     []byte
	// Capabilities are what the leaf advertises.
	Capabilities Capabilities
	// Extensions are the leaf node's extensions, in order.
	Extensions []Extension
	// EncryptionKey is the leaf node's HPKE encryption_key.
	EncryptionKey []byte
}

// NoLeaf stands for a leaf index the engine does not know.
const NoLeaf = ^uint32(0)

// Removal records the commit that removed this installation from a group:
// what JOIN-042 compares a re-add Welcome against. An engine keeps it with
// the inactive state until a Welcome replaces that state.
type Removal struct {
	// Leaf is the leaf this installation held before the commit, or
	// [NoLeaf] for a state removed before the engine kept removal records.
	Leaf uint32
	// Epoch and TreeHash are those of the epoch the removal commit led to.
	Epoch    uint64
	TreeHash []byte
}

// GroupView is the public state of a group as one installation holds it.
// Fork detection and join checks read it; it holds no secrets. A view's
// slices (Members and the bytes of each member, Extensions) may be shared
// with the engine's state and with other views: callers read them and
// copy what they change (COMP-570).
type GroupView struct {
	GroupID []byte
	Epoch   uint64
	// EpochAuthenticator is the epoch_authenticator of the current epoch
	// (RFC 9420 §8); empty for a state without secrets.
	EpochAuthenticator []byte
	TreeHash           []byte
	// Extensions are the group context extensions, in order.
	Extensions []Extension
	// Members are the non-blank leaves in leaf-index order.
	Members []Member
	// OwnLeaf is this installation's leaf index; for an inactive group the
	// leaf the removal commit took from it (Removal.Leaf).
	OwnLeaf uint32
	// Active reports whether this installation is a member; false after it
	// applied a commit that removed it. Epoch, TreeHash, Extensions and
	// Members of an inactive group are the public state of the epoch the
	// removal commit led to (FORK-088 reads that epoch); its
	// EpochAuthenticator is empty.
	Active bool
	// Removal is set exactly when the group is inactive.
	Removal *Removal
}

// KeyPackageOptions configures a key package the engine creates.
type KeyPackageOptions struct {
	// Credential is the basic credential identity (a serialized
	// MlsCredential, JOIN-004).
	Credential []byte
	// SignaturePrivateKey is the installation's Ed25519 private key.
	SignaturePrivateKey []byte
	NotBefore, NotAfter time.Time
	// Extensions are key-package extensions (0xff03, 0xff04, the
	// app_data_dictionary with its last-resort mark).
	Extensions []Extension
	// LeafExtensions and capabilities the leaf node advertises (JOIN-002).
	CapabilityExtensions []uint16
	CapabilityProposals  []uint16
}

// KeyPackageBundle is a created key package and its private keys.
type KeyPackageBundle struct {
	KeyPackage           []byte
	Ref                  []byte
	InitPrivateKey       []byte
	EncryptionPrivateKey []byte
}

// ValidatedKeyPackage is what a validator learns from a key package.
type ValidatedKeyPackage struct {
	Ref          []byte
	CipherSuite  uint16
	SignatureKey []byte
	InitKey      []byte
	Credential   []byte
	NotBefore    time.Time
	NotAfter     time.Time
	Extensions   []Extension
}

// ValidateOptions chooses the checks [MLS.ValidateKeyPackage] applies.
type ValidateOptions struct {
	// Now enables the lifetime check (JOIN-008) when non-zero.
	Now time.Time
}

// StagedWelcome is a Welcome the engine has decrypted and verified but not
// installed, so the caller can run join checks before deciding.
type StagedWelcome struct {
	// Group is the state the Welcome installs: its group id, the
	// GroupContext epoch, tree hash and extensions, and the members of its
	// ratchet tree (JOIN-042, JOIN-054 read them).
	Group GroupView
	// Signer is the leaf at GroupInfo.signer (JOIN-025).
	Signer Member
	// HasPSKs reports a non-empty GroupSecrets.psks (JOIN-027); such a
	// Welcome is not staged and has no Handle.
	HasPSKs bool
	// Handle identifies the staged state for [MLS.InstallWelcome]. It is
	// bound to the Welcome's group, epoch and bytes: staging the same
	// Welcome again returns the same handle.
	Handle string
	// StagedAt is when the engine first staged the Welcome; zero when it
	// does not know.
	StagedAt time.Time
}

// ProcessedKind says what a processed message was.
type ProcessedKind int

const (
	ProcessedApplication ProcessedKind = iota + 1
	ProcessedProposal
	ProcessedCommit
)

// SenderType is a message's sender type (RFC 9420 §6).
type SenderType uint8

const (
	// SenderMember is a member of the group, named by its leaf.
	SenderMember SenderType = 1
	// SenderExternal is an external sender of the group's external_senders.
	SenderExternal SenderType = 2
	// SenderNewMemberProposal is a joiner proposing its own Add.
	SenderNewMemberProposal SenderType = 3
	// SenderNewMemberCommit is a joiner's external commit.
	SenderNewMemberCommit SenderType = 4
)

// Proposal types of RFC 9420 §12.1, as [Proposal.Type] carries them.
const (
	ProposalAdd                    uint16 = 1
	ProposalUpdate                 uint16 = 2
	ProposalRemove                 uint16 = 3
	ProposalPreSharedKey           uint16 = 4
	ProposalReInit                 uint16 = 5
	ProposalExternalInit           uint16 = 6
	ProposalGroupContextExtensions uint16 = 7
)

// Proposal is one proposal a commit applies, as the commit resolves it.
type Proposal struct {
	// Type is the RFC 9420 proposal type (ProposalAdd, ...).
	Type uint16
	// SenderType and Sender name the proposer: for a member, its leaf in
	// the commit's epoch; for an inline proposal, the committer.
	SenderType SenderType
	Sender     Member
	// ByReference reports a proposal the commit names by reference, one
	// sent on its own in the commit's epoch.
	ByReference bool
	// KeyPackage (the KeyPackage, not in an MLSMessage) and Added, the leaf
	// it takes in the new epoch, describe an Add.
	KeyPackage []byte
	Added      Member
	// Removed is the leaf a Remove removes, as it was in the commit's epoch.
	Removed Member
	// Updated is the new leaf of an Update, at the proposer's leaf index.
	Updated Member
	// Extensions are the new group context extensions of a
	// GroupContextExtensions proposal.
	Extensions []Extension
}

// Processed is the result of [MLS.Process].
type Processed struct {
	Kind ProcessedKind
	// Epoch is the epoch the message names: the group's current epoch for
	// a proposal or commit, and for a late application message the past
	// epoch it was sent in.
	Epoch uint64
	// Application is the plaintext of an application message.
	Application []byte
	// AuthenticatedData is the message's authenticated_data.
	AuthenticatedData []byte
	// SenderType is the message's sender type.
	SenderType SenderType
	// Sender is the sending member: for a member sender its leaf as it was
	// in the message's epoch (a late message from a member removed since
	// names that member), for an external commit the leaf the joiner takes.
	Sender Member
	// Staged is the group's state after a commit, not yet merged.
	Staged *GroupView
	// Own reports this installation's own pending commit read back: the
	// engine staged it from the pending state, so MergeStaged merges it.
	Own bool
	// RemovesSelf reports a commit whose resolved Remove proposals remove
	// this installation's leaf, also when the same commit adds this
	// installation back (a readd, FORK-062); merging it makes the group
	// inactive with a [Removal] record.
	RemovesSelf bool
	// Proposals are a commit's proposals in the order the commit lists
	// them.
	Proposals []Proposal
}

// CommitOptions describes a commit the engine builds.
type CommitOptions struct {
	// Add are key packages to add.
	Add [][]byte
	// Remove are leaf indices to remove.
	Remove []uint32
	// GroupContextExtensions replaces the group context extensions when set.
	GroupContextExtensions []Extension
	// ForcePath includes an UpdatePath even when the proposals do not need
	// one.
	ForcePath bool
	// IncludeByReference, when set, decides which of the epoch's cached
	// proposals — those other members sent on their own — the commit
	// includes by reference; it is given each one with its Type, proposer
	// and the fields of its kind (Removed, Extensions, Updated, and for an
	// Add its KeyPackage and Added leaf without a leaf index). Nil
	// includes every one RFC 9420 §12.2 allows.
	IncludeByReference func(Proposal) bool
}

// CommitOutput is a built commit, pending until merged or cleared.
type CommitOutput struct {
	// Commit is the MLSMessage carrying the commit (a PublicMessage).
	Commit []byte
	// Welcome is the MLSMessage carrying the Welcome, nil when nothing was
	// added.
	Welcome []byte
	// GroupInfo is the signed GroupInfo of the new epoch.
	GroupInfo []byte
	// Staged is the group's state once merged.
	Staged GroupView
	// Proposals are the commit's proposals in the order the commit lists
	// them: the cached proposals of the epoch it includes by reference,
	// then those CommitOptions asked for, inline.
	Proposals []Proposal
}

// MLS is the group engine. Every call that reads or writes group state
// takes the caller's [Tx], so the engine's state and the caller's records
// commit or roll back together (JOIN-046).
//
// Failures of [MLS.Process] wrap exactly one of [ErrWrongEpoch] (as a
// [*WrongEpochError]), [ErrUndecryptable] or [ErrInvalid], and, when the
// message names an epoch, are a [*ProcessError] carrying it. A failure of
// the storage handle is returned as it is, so a caller can tell a property
// of the message from a local failure. Process on a group this
// installation was removed from does not fail with [ErrInactive] alone:
// a message of an epoch before the removal is [ErrWrongEpoch] (older), of
// the removal's epoch [ErrUndecryptable], of a later one [ErrWrongEpoch]
// (future); each also wraps ErrInactive as its reason.
//
// [EpochEqual] is what Process reports for this installation's own commit
// of the current epoch when the engine holds no pending commit it came
// from (it was cleared, or built by a copy of this installation's state):
// the members that apply it move on and this installation cannot follow,
// which FORK-073 keeps as a divergence signal.
type MLS interface {
	// CreateKeyPackage creates a key package and its private keys; the
	// caller stores them.
	CreateKeyPackage(ctx context.Context, opts KeyPackageOptions) (KeyPackageBundle, error)
	// ValidateKeyPackage checks a key package under RFC 9420 §10.1 (JOIN-007)
	// and, when opts.Now is set, its lifetime (JOIN-008). It returns an error
	// wrapping [ErrInvalid] naming the failed check.
	ValidateKeyPackage(ctx context.Context, kp []byte, opts ValidateOptions) (ValidatedKeyPackage, error)
	// CreateGroup creates a group with this installation as its only
	// member. It fails with an error wrapping [ErrAlreadyExists], and
	// changes nothing, when the engine holds state for the group.
	CreateGroup(ctx context.Context, tx Tx, groupID []byte, signer KeyPackageBundle, extensions []Extension) (GroupView, error)
	// StageWelcome decrypts and verifies a Welcome with the key package's
	// private keys without installing it. A Welcome whose MLS version or
	// cipher suite the key package does not advertise, or whose group
	// context holds an extension the key package's leaf does not
	// advertise, fails with an error wrapping [ErrUnsupported] (JOIN-087);
	// one whose secrets do not decrypt wraps [ErrUndecryptable]; any other
	// defect, such as a Welcome for another key package, wraps [ErrInvalid].
	StageWelcome(ctx context.Context, tx Tx, welcome []byte, kp KeyPackageRecord) (StagedWelcome, error)
	// InstallWelcome installs a staged Welcome when the engine holds no
	// state for its group, and deletes every staged Welcome of that group.
	// Over held state it fails with an error wrapping [ErrAlreadyExists]
	// and changes nothing; [MLSWelcomes.InstallWelcomeWith] replaces.
	// An unknown or discarded handle wraps [ErrNotFound].
	InstallWelcome(ctx context.Context, tx Tx, handle string) (GroupView, error)
	// Group returns the group's current public state, or an error wrapping
	// [ErrGroupNotFound].
	Group(ctx context.Context, tx Tx, groupID []byte) (GroupView, error)
	// Process processes one MLSMessage of the group. A commit is staged, not
	// merged: the caller merges it with [MLS.MergeStaged]. Every call first
	// drops the commit an earlier Process staged. This installation's own
	// pending commit, read back, is staged from the pending state and
	// reported with Processed.Own; a different commit of the same epoch is
	// processed as any other, and the caller clears its own pending commit
	// with [MLS.ClearPending] before merging it.
	Process(ctx context.Context, tx Tx, groupID, message []byte) (Processed, error)
	// MergeStaged merges the commit staged by the last Process, which must
	// have been a commit that succeeded; otherwise it fails with an error
	// wrapping [ErrNotFound]. A commit that removed this installation
	// leaves the group inactive with its [Removal] record.
	MergeStaged(ctx context.Context, tx Tx, groupID []byte) (GroupView, error)
	// Commit builds a commit; it stays pending until MergePending or
	// ClearPending.
	Commit(ctx context.Context, tx Tx, groupID []byte, opts CommitOptions) (CommitOutput, error)
	// MergePending merges this installation's pending commit.
	MergePending(ctx context.Context, tx Tx, groupID []byte) (GroupView, error)
	// ClearPending discards this installation's pending commit; a caller
	// does so when another commit of the epoch won.
	ClearPending(ctx context.Context, tx Tx, groupID []byte) error
	// Encrypt protects an application message as a PrivateMessage.
	Encrypt(ctx context.Context, tx Tx, groupID, plaintext, authenticatedData []byte) ([]byte, error)
	// Export derives an exporter secret (RFC 9420 §8.5).
	Export(ctx context.Context, tx Tx, groupID []byte, label string, context []byte, length int) ([]byte, error)
}

// MLSPendingCommits is implemented by engines that hand back a pending
// commit, so that a client restarted after [MLS.Commit] can publish it
// again. Detect it with a type assertion.
type MLSPendingCommits interface {
	// PendingCommit returns this installation's pending commit of the
	// group as [MLS.Commit] or [MLSExternal.JoinExternal] returned it
	// (commit, Welcome, GroupInfo, staged state and proposals), or an
	// error wrapping [ErrNotFound] when none is pending.
	PendingCommit(ctx context.Context, tx Tx, groupID []byte) (CommitOutput, error)
}

// InstallOptions tune [MLSWelcomes.InstallWelcomeWith].
type InstallOptions struct {
	// Replace installs over state the engine holds for the group; the
	// caller decides that under its replacement rules (JOIN-042,
	// JOIN-043). Even so the engine refuses, with an error wrapping
	// [ErrAlreadyExists], a Welcome whose epoch is less than the held
	// state's: that would move the group backwards.
	Replace bool
}

// MLSWelcomes is implemented by engines that manage staged Welcomes across
// restarts. Detect it with a type assertion.
type MLSWelcomes interface {
	// InstallWelcomeWith is [MLS.InstallWelcome] with options.
	InstallWelcomeWith(ctx context.Context, tx Tx, handle string, opts InstallOptions) (GroupView, error)
	// StagedWelcome returns what StageWelcome returned for the handle, or
	// an error wrapping [ErrNotFound].
	StagedWelcome(ctx context.Context, tx Tx, handle string) (StagedWelcome, error)
	// StagedWelcomes lists the staged Welcomes of the group, or of every
	// group when groupID is nil, ordered by handle.
	StagedWelcomes(ctx context.Context, tx Tx, groupID []byte) ([]StagedWelcome, error)
	// DiscardWelcome deletes a staged Welcome and its secrets; an unknown
	// handle is not an error.
	DiscardWelcome(ctx context.Context, tx Tx, handle string) error
	// ExpireWelcomes discards every staged Welcome staged before the
	// given time, and those whose staging time is unknown, and returns
	// how many it discarded.
	ExpireWelcomes(ctx context.Context, tx Tx, stagedBefore time.Time) (int, error)
}

// ExternalJoinOptions describe an external commit.
type ExternalJoinOptions struct {
	// KeyPackage gives the joiner's leaf: its credential, capabilities and
	// extensions (its encryption key is replaced by the commit's path).
	KeyPackage KeyPackageBundle
	// Resync removes, in the same commit, the leaf of the GroupInfo's tree
	// that carries this installation's signature key (RFC 9420 §12.4.3.2).
	Resync bool
	// Recover removes, in the same commit, the leftmost leaf of the
	// GroupInfo's tree that carries the key package's credential under
	// another signature key: an installation of the joiner's own inbox
	// that was lost (a recovery join). It fails with an error wrapping
	// [ErrNotFound] when the tree holds no such leaf. Exclusive with
	// Resync.
	Recover bool
}

// MLSExternal is implemented by engines that publish GroupInfo and join
// by external commit, for resync and the opt-in repair. Detect it with a
// type assertion.
type MLSExternal interface {
	// GroupInfo returns the signed GroupInfo of the group's current epoch
	// as an MLSMessage, with the ratchet_tree and external_pub extensions.
	// An inactive group fails with an error wrapping [ErrInactive].
	GroupInfo(ctx context.Context, tx Tx, groupID []byte) ([]byte, error)
	// JoinExternal builds an external commit into the group groupInfo (an
	// MLSMessage GroupInfo) describes. It stays pending like a commit of
	// [MLS.Commit]: once the delivery service accepted it, MergePending
	// installs the joined state, replacing any the engine holds for the
	// group, and ClearPending drops it. Process recognises it read back
	// (Processed.Own) only where the engine holds active state of the
	// GroupInfo's epoch; otherwise the caller merges it with MergePending.
	// A GroupInfo that fails verification wraps [ErrInvalid]; one of
	// another MLS version or cipher suite wraps [ErrUnsupported].
	JoinExternal(ctx context.Context, tx Tx, groupInfo []byte, opts ExternalJoinOptions) (CommitOutput, error)
}

// ProposalOptions describe one proposal an engine sends on its own:
// exactly one field is set.
type ProposalOptions struct {
	// Remove proposes removing the leaf at this index.
	Remove *uint32
	// Add proposes adding the installation of this key package.
	Add []byte
	// GroupContextExtensions proposes replacing the group context
	// extensions.
	GroupContextExtensions []Extension
	// Update proposes a fresh encryption key for this installation's leaf.
	Update bool
}

// MLSProposals is implemented by engines that send standalone proposals
// (RFC 9420 §12.1), as a PublicMessage of the current epoch. regroup's
// client never sends one (COMP-245); the capability serves interop and
// tests that play a member that does. Detect it with a type assertion.
type MLSProposals interface {
	// Propose returns the MLSMessage of the proposal and keeps it for the
	// epoch, so that a commit of this installation may include it by
	// reference. An inactive group fails with an error wrapping
	// [ErrInactive]; a malformed option with [ErrInvalidArgument].
	Propose(ctx context.Context, tx Tx, groupID []byte, opts ProposalOptions) ([]byte, error)
}

// ProposalSelfRemove is the SelfRemove proposal type of
// draft-ietf-mls-extensions at the code point the draft suggests: a draft
// code point, not yet assigned by IANA, as [Proposal.Type] carries it.
const ProposalSelfRemove uint16 = 0x000a

// MLSSelfRemove is implemented by engines that send the draft SelfRemove
// proposal: a member proposes its own removal and another member's
// commit includes it by reference. Only a self-remove-capable group, one
// whose every member advertises [ProposalSelfRemove] in its capabilities
// (KeyPackageOptions.CapabilityProposals), carries it. Detect it with a
// type assertion.
type MLSSelfRemove interface {
	// ProposeSelfRemove returns an MLSMessage (a PublicMessage) proposing
	// this installation's removal from the group, and keeps the proposal
	// for the epoch; at most one per epoch. A group that is not
	// self-remove-capable fails with an error wrapping [ErrUnsupported],
	// an inactive one with [ErrInactive]. A commit of another member that
	// includes it reports a [Proposal] of type ProposalSelfRemove whose
	// Removed is the proposer, and Processed.RemovesSelf for the proposer.
	ProposeSelfRemove(ctx context.Context, tx Tx, groupID []byte) ([]byte, error)
}
