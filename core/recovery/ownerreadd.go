package recovery

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/core/join"
	"github.com/regroup-mls/regroup/ports"
)

// ErrReaddRefused is wrapped by an owner's [Recovery.Readd] that this
// installation may not make: it is not a permitted readder, or the
// installation is not a leaf of the group.
var ErrReaddRefused = errors.New("readd refused")

// Readd re-adds an installation of the group on this installation's own
// initiative, without a readd request: an owner repairing a device that
// reported it cannot process a confirmed commit (ADR-0030 Decision 6,
// COMP-452). It makes the readd commit of FORK-062 under the same checks
// as an answered request: this installation a permitted readder
// (FORK-080: an active member with consent allowed, a super admin of a
// group, a member of a DM), the group's minimum protocol version raised
// first (FORK-063), and the installation's newest key package valid
// under JOIN-007, JOIN-008 and JOIN-082 (one that fails wraps
// keypackage.ErrRejected; none served wraps ports.ErrNotFound). Unlike an
// answered request it does not wait for a known fork state: the stuck
// installation's own state is the one that cannot move. It returns the
// commit's sequence id; a commit whose Welcome is not stored yet returns
// it with [ErrWelcomeNotStored] (the host publishes the Welcome again).
func (r *Recovery) Readd(ctx context.Context, gid, key []byte) (uint64, error) {
	var leaf ports.Member
	err := r.tx(ctx, func(tx ports.Tx) (err error) {
		leaf, err = r.readdable(ctx, tx, gid, key)
		return err
	})
	if err != nil {
		return 0, err
	}
	if err := r.raiseVersion(ctx, gid); err != nil {
		return 0, fmt.Errorf("readd of %x: %w", key, err)
	}
	kp, err := r.keyPackage(ctx, leaf.InboxID, key)
	if err != nil {
		return 0, fmt.Errorf("readd of %x: key package: %w", key, err)
	}
	seq, err := r.o.Host.Commit(ctx, gid, func(ctx context.Context, tx ports.Tx, view ports.GroupView) (ports.CommitOptions, []join.Recipient, error) {
		leaf, err := r.readdable(ctx, tx, gid, key)
		if err != nil {
			return ports.CommitOptions{}, nil, err
		}
		opts, rcpt := readdCommit(leaf, kp)
		return opts, rcpt, nil
	})
	if err != nil {
		return seq, fmt.Errorf("readd of %x: %w", key, err)
	}
	r.o.Logger.Info("owner's readd published", "group", fmt.Sprintf("%x", gid), "installation", fmt.Sprintf("%x", key), "seq", seq)
	return seq, nil
}

// readdable checks, on what tx reads, that this installation may readd
// key in the group and returns key's leaf.
func (r *Recovery) readdable(ctx context.Context, tx ports.Tx, gid, key []byte) (ports.Member, error) {
	_, view, d, err := r.standing(ctx, tx, gid)
	if err != nil {
		return ports.Member{}, err
	}
	if d != nil {
		return ports.Member{}, fmt.Errorf("%w: %s", ErrReaddRefused, d.reason)
	}
	if bytes.Equal(key, r.ownKey()) {
		return ports.Member{}, fmt.Errorf("%w: the installation is this one", ErrReaddRefused)
	}
	leaf, ok := leafOf(view, key)
	if !ok {
		return ports.Member{}, fmt.Errorf("%w: installation %x is not a leaf of the group", ErrReaddRefused, key)
	}
	return leaf, nil
}
