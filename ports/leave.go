package ports

import "context"

// LeaveRecord is what a delivery service keeps of a member's leave
// request (ADR-0030 Decision 7): from the moment it is recorded, the
// service delivers none of the group's messages above Through to the
// installations named, and accepts nothing more from the inbox in that
// group but another leave request.
type LeaveRecord struct {
	GroupID []byte
	InboxID string
	// InstallationKeys are the inbox's installations the record blocks.
	InstallationKeys [][]byte
	// Through is the highest sequence id of the group's topic still
	// delivered to them: the leave request's own, once it is stored.
	Through uint64
}

// LeaveStore is an optional interface of an [EnvelopeStore] that keeps
// the delivery service's leave records. A delivery service with commit
// acceptance on uses it when the store has it. Implementations are safe
// for concurrent use, also by several processes sharing a database.
type LeaveStore interface {
	// RecordLeave stores r: every installation key it names is blocked in
	// the group under r.InboxID. Recording again adds keys and keeps the
	// higher Through of the stored and the new one.
	RecordLeave(ctx context.Context, r LeaveRecord) error
	// LeftThrough returns the Through of the record that blocks the
	// installation in the group; ok is false when none does.
	LeftThrough(ctx context.Context, groupID, installationKey []byte) (through uint64, ok bool, err error)
	// LeftInboxes returns the inboxes the group holds records of, each
	// once, in ascending order.
	LeftInboxes(ctx context.Context, groupID []byte) ([]string, error)
	// ForgetLeave deletes every record of the inbox in the group.
	ForgetLeave(ctx context.Context, groupID []byte, inbox string) error
}
