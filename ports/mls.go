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

// Member is one leaf of a group's ratchet tree.
type Member struct {
	LeafIndex uint32
	// SignatureKey is the leaf node's signature_key: the installation key.
	SignatureKey []byte
	// InboxID is the inbox the leaf's MlsCredential names.
	InboxID string
}

// GroupView is the public state of a group as one installation holds it.
// Fork detection and join checks read it; it holds no secrets.
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
	// OwnLeaf is this installation's leaf index; meaningful when Active.
	OwnLeaf uint32
	// Active reports whether this installation is a member; false after it
	// applied a commit that removed it.
	Active bool
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
	Group GroupView
	// Signer is the leaf at GroupInfo.signer (JOIN-025).
	Signer Member
	// HasPSKs reports a non-empty GroupSecrets.psks (JOIN-027).
	HasPSKs bool
	// Handle identifies the staged state for [MLS.InstallWelcome].
	Handle string
}

// ProcessedKind says what a processed message was.
type ProcessedKind int

const (
	ProcessedApplication ProcessedKind = iota + 1
	ProcessedProposal
	ProcessedCommit
)

// Processed is the result of [MLS.Process].
type Processed struct {
	Kind ProcessedKind
	// Application is the plaintext of an application message.
	Application []byte
	// AuthenticatedData is the message's authenticated_data.
	AuthenticatedData []byte
	// Sender is the sending member.
	Sender Member
	// Staged is the group's state after a commit, not yet merged.
	Staged *GroupView
	// RemovesSelf reports a commit that removes this installation.
	RemovesSelf bool
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
}

// MLS is the group engine. Every call that reads or writes group state
// takes the caller's [Tx], so the engine's state and the caller's records
// commit or roll back together (JOIN-046).
//
// Failures of [MLS.Process] wrap exactly one of [ErrWrongEpoch] (as a
// [*WrongEpochError]), [ErrUndecryptable] or [ErrInvalid]; a failure of the
// storage handle is returned as it is, so a caller can tell a property of
// the message from a local failure.
type MLS interface {
	// CreateKeyPackage creates a key package and its private keys; the
	// caller stores them.
	CreateKeyPackage(ctx context.Context, opts KeyPackageOptions) (KeyPackageBundle, error)
	// ValidateKeyPackage checks a key package under RFC 9420 §10.1 (JOIN-007)
	// and, when opts.Now is set, its lifetime (JOIN-008). It returns an error
	// wrapping [ErrInvalid] naming the failed check.
	ValidateKeyPackage(ctx context.Context, kp []byte, opts ValidateOptions) (ValidatedKeyPackage, error)
	// CreateGroup creates a group with this installation as its only member.
	CreateGroup(ctx context.Context, tx Tx, groupID []byte, signer KeyPackageBundle, extensions []Extension) (GroupView, error)
	// StageWelcome decrypts and verifies a Welcome with the key package's
	// private keys without installing it.
	StageWelcome(ctx context.Context, tx Tx, welcome []byte, kp KeyPackageRecord) (StagedWelcome, error)
	// InstallWelcome installs a staged Welcome, replacing any state the
	// engine held for the group.
	InstallWelcome(ctx context.Context, tx Tx, handle string) (GroupView, error)
	// Group returns the group's current public state, or an error wrapping
	// [ErrGroupNotFound].
	Group(ctx context.Context, tx Tx, groupID []byte) (GroupView, error)
	// Process processes one MLSMessage of the group. A commit is staged, not
	// merged: the caller merges it with [MLS.MergeStaged].
	Process(ctx context.Context, tx Tx, groupID, message []byte) (Processed, error)
	// MergeStaged merges the commit staged by the last Process.
	MergeStaged(ctx context.Context, tx Tx, groupID []byte) (GroupView, error)
	// Commit builds a commit; it stays pending until MergePending or
	// ClearPending.
	Commit(ctx context.Context, tx Tx, groupID []byte, opts CommitOptions) (CommitOutput, error)
	// MergePending merges this installation's pending commit.
	MergePending(ctx context.Context, tx Tx, groupID []byte) (GroupView, error)
	// ClearPending discards this installation's pending commit.
	ClearPending(ctx context.Context, tx Tx, groupID []byte) error
	// Encrypt protects an application message as a PrivateMessage.
	Encrypt(ctx context.Context, tx Tx, groupID, plaintext, authenticatedData []byte) ([]byte, error)
	// Export derives an exporter secret (RFC 9420 §8.5).
	Export(ctx context.Context, tx Tx, groupID []byte, label string, context []byte, length int) ([]byte, error)
}
