package ports

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Catch-up after a restore (ADR-0030 Decision 9). A delivery service
// restored from a backup holds its groups' public states as they were at
// the backup; the members hold the commits merged after it. Restore mode
// puts every group with a public state in catch-up: the service then
// takes the members' merged commits again, checked against public state
// and the role policy, until its catch-up window passes without one.

// ErrCatchUp reports a commit the delivery service did not take because
// its group is in catch-up after a restore: the commit is not the next
// one of the restored chain as another inbox's (or a super admin's)
// installation uploads it, or the group's catch-up stopped on conflicting
// uploads. The client uploads the commits it merged (oldest first) and
// retries later. Like [ErrEpochConflict] it is a class of its own: the
// change it carries is not refused by any rule.
var ErrCatchUp = errors.New("the group is in catch-up after a restore of the delivery service")

// ErrOtherChain is the [ErrCatchUp] of an uploaded commit for an epoch
// whose commit a super admin's chain decided (COMP-494): the uploader's
// branch lost, and its client resyncs onto the chain the service holds
// (COMP-522). errors.Is(err, ErrCatchUp) holds for it.
var ErrOtherChain = fmt.Errorf("%w: another chain decided the epoch", ErrCatchUp)

// CatchUpState is a group's catch-up as the service stores it.
type CatchUpState struct {
	// Epoch is the epoch of the group's public state when the restore put
	// it in catch-up.
	Epoch uint64
	// Progress is when the group last took an uploaded commit, or was put
	// in catch-up.
	Progress time.Time
	// Stopped is set when devices uploaded different commits for one
	// epoch: the service takes no commit of the group.
	Stopped bool
}

// CatchUpStore is the optional ability of a [PublicStateStore] that
// records the groups a restore put in catch-up. Without it a service has
// no group in catch-up.
type CatchUpStore interface {
	// CatchUpOf returns the group's catch-up; ok false when it is not in
	// catch-up.
	CatchUpOf(ctx context.Context, groupID []byte) (s CatchUpState, ok bool, err error)
	// CatchUpCommit returns the digest of the commit for epoch that
	// catch-up took for the group, and whether a super admin's
	// installation uploaded it; ok false when it took none.
	CatchUpCommit(ctx context.Context, groupID []byte, epoch uint64) (digest []byte, superAdmin, ok bool, err error)
	// RecordCatchUpCommit records that catch-up took the commit with
	// digest for epoch, by an upload a super admin's installation made
	// when superAdmin is set, and moves the group's Progress to at. A
	// second record for the same epoch keeps the first.
	RecordCatchUpCommit(ctx context.Context, groupID []byte, epoch uint64, digest []byte, superAdmin bool, at time.Time) error
	// StopCatchUp marks the group's catch-up stopped.
	StopCatchUp(ctx context.Context, groupID []byte, at time.Time) error
	// EndCatchUp takes the group out of catch-up and forgets what its
	// catch-up took; a group not in catch-up is no error.
	EndCatchUp(ctx context.Context, groupID []byte) error
}
