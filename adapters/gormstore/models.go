package gormstore

// The persistence models. They are unexported: nothing outside this package
// sees a gorm tag. Column names follow the specs' terms; times are Unix
// nanoseconds (see toNs).

type groupRow struct {
	ID                  []byte `gorm:"primaryKey"`
	ConversationType    int32  `gorm:"not null"`
	DMID                string `gorm:"column:dm_id;not null"`
	Consent             int32  `gorm:"not null;index"`
	Active              bool   `gorm:"not null"`
	MessageCursor       uint64 `gorm:"not null"`
	JoinAnchor          uint64 `gorm:"not null"`
	Membership          uint64 `gorm:"not null"`
	GroupRoot           []byte
	ForkState           int32  `gorm:"not null"`
	MaybeForked         bool   `gorm:"not null"`
	MaybeForkedReason   string `gorm:"not null"`
	MinProtocolVersion  string `gorm:"not null"`
	RestoredPlaceholder bool   `gorm:"not null"`
	CreatedNs           int64  `gorm:"not null"`
	UpdatedNs           int64  `gorm:"not null"`
}

func (groupRow) TableName() string { return "groups" }

// localLogHead holds the last Seq assigned per group; locking it serializes
// appends to one group's local log.
type localLogHead struct {
	GroupID []byte `gorm:"primaryKey"`
	LastSeq uint64 `gorm:"not null"`
}

func (localLogHead) TableName() string { return "local_commit_log_heads" }

type localLogRow struct {
	GroupID                   []byte `gorm:"primaryKey;uniqueIndex:local_commit_log_outcome,priority:1"`
	Seq                       uint64 `gorm:"primaryKey;autoIncrement:false"`
	Membership                uint64 `gorm:"not null;uniqueIndex:local_commit_log_outcome,priority:2"`
	CommitSequenceID          uint64 `gorm:"not null;uniqueIndex:local_commit_log_outcome,priority:3"`
	LastEpochAuthenticator    []byte
	CommitResult              int32  `gorm:"not null"`
	AppliedEpochNumber        uint64 `gorm:"not null"`
	AppliedEpochAuthenticator []byte
	RemovedThisInstallation   bool   `gorm:"not null"`
	Legacy                    bool   `gorm:"not null"`
	ChangeClass               int32  `gorm:"not null"`
	AddedSuperAdmins          string `gorm:"not null"`
	RoleEvidence              bool   `gorm:"not null"`
	RecordedNs                int64  `gorm:"not null"`
}

func (localLogRow) TableName() string { return "local_commit_log" }

type remoteLogRow struct {
	GroupID                   []byte `gorm:"primaryKey"`
	EnvelopeSequenceID        uint64 `gorm:"primaryKey;autoIncrement:false"`
	CommitSequenceID          uint64 `gorm:"not null"`
	LastEpochAuthenticator    []byte
	CommitResult              int32  `gorm:"not null"`
	AppliedEpochNumber        uint64 `gorm:"not null"`
	AppliedEpochAuthenticator []byte
	AuthorInstallationKey     []byte
	AcceptedNs                int64 `gorm:"not null"`
}

func (remoteLogRow) TableName() string { return "remote_commit_log" }

type readPositionRow struct {
	GroupID    []byte `gorm:"primaryKey"`
	SequenceID uint64 `gorm:"not null"`
}

func (readPositionRow) TableName() string { return "remote_commit_log_read_positions" }

type publishStateRow struct {
	GroupID          []byte `gorm:"primaryKey"`
	ConfirmedThrough uint64 `gorm:"not null"`
	EligibleFrom     uint64 `gorm:"not null"`
	LegacyRecovered  bool   `gorm:"not null"`
	Publisher        bool   `gorm:"not null"`
}

func (publishStateRow) TableName() string { return "publish_progress" }

type readerFloorRow struct {
	GroupID    []byte `gorm:"primaryKey"`
	EpochFloor uint64 `gorm:"not null"`
}

func (readerFloorRow) TableName() string { return "legacy_reader_epoch_floors" }

type boundaryRow struct {
	GroupID         []byte `gorm:"primaryKey"`
	InstallationKey []byte `gorm:"primaryKey"`
	SequenceID      uint64 `gorm:"not null"`
}

func (boundaryRow) TableName() string { return "publisher_boundaries" }

type keyPackageRow struct {
	Ref                  []byte `gorm:"primaryKey"`
	KeyPackage           []byte
	WrapperAlgorithm     int32  `gorm:"not null"`
	WrapperPublicKey     []byte `gorm:"index"`
	InitPrivateKey       []byte
	EncryptionPrivateKey []byte
	WrapperPrivateKey    []byte
	CreatedNs            int64  `gorm:"not null;index"`
	NotAfterNs           int64  `gorm:"not null"`
	PublishSequenceID    uint64 `gorm:"not null"`
	PublishConfirmedNs   int64  `gorm:"not null"`
	PublishRefused       bool   `gorm:"not null"`
	DestroyedNs          int64  `gorm:"not null"`
}

func (keyPackageRow) TableName() string { return "key_packages" }

type heldWelcomeRow struct {
	SequenceID        uint64 `gorm:"primaryKey;autoIncrement:false"`
	Envelope          []byte
	ServerTimestampNs int64  `gorm:"not null"`
	FirstSeenNs       int64  `gorm:"not null"`
	DeadlineNs        int64  `gorm:"not null"`
	Reason            string `gorm:"not null"`
	Attempts          int64  `gorm:"not null"`
	GroupID           []byte
}

func (heldWelcomeRow) TableName() string { return "held_welcomes" }

type readdRow struct {
	GroupID         []byte `gorm:"primaryKey"`
	InstallationKey []byte `gorm:"primaryKey"`
	Requested       bool   `gorm:"not null;index"`
	RequestedAt     uint64 `gorm:"not null"`
	RespondedAt     uint64 `gorm:"not null"`
	NotBeforeNs     int64  `gorm:"not null"`
	UpdatedNs       int64  `gorm:"not null"`
}

func (readdRow) TableName() string { return "readd_status" }

type processedEnvelopeRow struct {
	Topic      []byte `gorm:"primaryKey"`
	SequenceID uint64 `gorm:"primaryKey;autoIncrement:false"`
}

func (processedEnvelopeRow) TableName() string { return "processed_envelopes" }

type identityUpdateRow struct {
	InboxID     string `gorm:"primaryKey"`
	SequenceID  uint64 `gorm:"primaryKey;autoIncrement:false"`
	UpdateBytes []byte
}

func (identityUpdateRow) TableName() string { return "identity_updates" }

type blobRow struct {
	Namespace []byte `gorm:"primaryKey"`
	BlobKey   []byte `gorm:"primaryKey"`
	Value     []byte
}

func (blobRow) TableName() string { return "blobs" }

// forkComparisonRow holds a conversation's ports.ForkComparison (schema
// step 2).
type forkComparisonRow struct {
	GroupID     []byte `gorm:"primaryKey"`
	Membership  uint64 `gorm:"not null"`
	Shared      uint64 `gorm:"not null"`
	NewestLocal uint64 `gorm:"not null"`
}

func (forkComparisonRow) TableName() string { return "fork_comparisons" }

// schemaMigration records one applied migration step.
type schemaMigration struct {
	Version   int64  `gorm:"primaryKey;autoIncrement:false"`
	Name      string `gorm:"not null"`
	AppliedNs int64  `gorm:"not null"`
}

func (schemaMigration) TableName() string { return "schema_migrations" }
