package recovery

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/core/join"
	"github.com/regroup-mls/regroup/core/keypackage"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
)

// verdict is what one check of a kept request decided.
type verdict int

const (
	act  verdict = iota
	keep         // answer it at a later pass
	drop         // it will never be answered here
)

// decision is a verdict with the reason for it; a decision is also an
// error, so that a Build can end a commit with it.
type decision struct {
	v      verdict
	reason string
}

func (d *decision) Error() string { return d.reason }

func keepFor(format string, args ...any) *decision {
	return &decision{v: keep, reason: fmt.Sprintf(format, args...)}
}

func dropFor(format string, args ...any) *decision {
	return &decision{v: drop, reason: fmt.Sprintf(format, args...)}
}

// Respond answers the readd requests this installation keeps (FORK-080):
// group by group, it processes the group's topic to the highest sequence
// id the delivery service reports, checks the conditions of FORK-080, and
// publishes one readd commit per request it can answer (FORK-061 to
// FORK-064). While responses are disabled it does nothing (FORK-071). It
// returns the local failures, joined; every request it could not decide
// stays for a later pass.
func (r *Recovery) Respond(ctx context.Context) error {
	if r.o.Policy.DisableResponses {
		return nil
	}
	r.pass.Lock()
	defer r.pass.Unlock()
	var held []ports.ReaddStatus
	err := r.tx(ctx, func(tx ports.Tx) (err error) {
		held, err = tx.Readds().ListRequested(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("readd responses: %w", err)
	}
	byGroup := map[string][]ports.ReaddStatus{}
	var order []string
	for _, s := range held {
		if bytes.Equal(s.InstallationKey, r.ownKey()) {
			continue // this installation's own request
		}
		k := string(s.GroupID)
		if _, ok := byGroup[k]; !ok {
			order = append(order, k)
		}
		byGroup[k] = append(byGroup[k], s)
	}
	var errs []error
	for _, k := range order {
		if err := r.respondGroup(ctx, []byte(k), byGroup[k]); err != nil {
			errs = append(errs, fmt.Errorf("readd responses in %x: %w", k, err))
		}
	}
	return errors.Join(errs...)
}

// respondGroup decides the requests kept for one group.
func (r *Recovery) respondGroup(ctx context.Context, gid []byte, reqs []ports.ReaddStatus) error {
	// Conditions processing cannot restore drop the requests at once.
	var d *decision
	if err := r.tx(ctx, func(tx ports.Tx) (err error) {
		_, _, d, err = r.standing(ctx, tx, gid)
		return err
	}); err != nil {
		return err
	}
	if d != nil {
		return r.decideAll(ctx, gid, reqs, d)
	}
	// FORK-080: process the topic to the highest sequence id reported.
	highest, err := r.o.Transport.HighestSequenceID(ctx, groupTopic(gid))
	if err != nil {
		return err
	}
	read, err := r.o.Host.CatchUp(ctx, gid)
	if err != nil {
		return err
	}
	var cursor uint64
	if err := r.tx(ctx, func(tx ports.Tx) error {
		g, err := tx.Groups().Get(ctx, gid)
		cursor = g.Cursor
		return err
	}); err != nil {
		return err
	}
	// Junk read past counts as processed (COMP-271): the stored cursor
	// stays below an envelope the client could not authenticate — a
	// duplicate of a commit whose publish answer was lost, a forgery —
	// and would keep the request for ever.
	if max(cursor, read) < highest {
		return nil // kept: the topic served less than it reported
	}
	var errs []error
	for _, s := range reqs {
		var leaf ports.Member
		if err := r.tx(ctx, func(tx ports.Tx) (err error) {
			leaf, d, err = r.check(ctx, tx, gid, s.InstallationKey)
			return err
		}); err != nil {
			errs = append(errs, err)
			continue
		}
		if d != nil {
			errs = append(errs, r.decide(ctx, gid, s.InstallationKey, d))
			continue
		}
		errs = append(errs, r.readd(ctx, gid, leaf))
	}
	return errors.Join(errs...)
}

// check applies every condition of one request that the state in tx
// decides, the reasons to drop it before the reasons to wait: this
// installation's standing (FORK-080), the request still kept, answered
// by a readd (FORK-064) or older than this membership (COMP-203), the
// requester a leaf of the tree (FORK-061); then this installation's fork
// state (FORK-080), a position it holds (FORK-080) and the refresh
// interval (FORK-062). It returns the requester's leaf, or the decision
// that stops it. The responder checks before it fetches anything and
// again in the readd commit's build, on the state that commit builds on.
func (r *Recovery) check(ctx context.Context, tx ports.Tx, gid, key []byte) (ports.Member, *decision, error) {
	g, view, d, err := r.standing(ctx, tx, gid)
	if err != nil || d != nil {
		return ports.Member{}, d, err
	}
	s, err := getReadd(ctx, tx, gid, key)
	if err != nil {
		return ports.Member{}, nil, err
	}
	leaf, member := leafOf(view, key)
	switch {
	case !s.Requested:
		return ports.Member{}, dropFor("answered meanwhile"), nil
	case s.RespondedAt != 0 && s.RequestedAt < s.RespondedAt:
		return ports.Member{}, dropFor("answered by the readd commit %d", s.RespondedAt), nil
	case s.RequestedAt < g.JoinAnchor:
		// A readd between the request and the Welcome that began this
		// membership was never processed here: it may have answered it.
		return ports.Member{}, dropFor("the request names commit %d, before this membership began at %d", s.RequestedAt, g.JoinAnchor), nil
	case !member:
		return ports.Member{}, dropFor("FORK-061: the requester is not a leaf of the group"), nil
	case r.o.CommitLogDisabled:
		return ports.Member{}, keepFor("the commit log is disabled: every fork state is unknown (FORK-004)"), nil
	case g.ForkState == ports.ForkForked:
		// A forked readder never acts; it keeps the request, which its
		// own repair may let it answer.
		return ports.Member{}, keepFor("this installation is forked"), nil
	case g.ForkState == ports.ForkUnknown:
		return ports.Member{}, keepFor("this installation's fork state is unknown"), nil
	case s.RequestedAt > g.Cursor:
		return ports.Member{}, keepFor("the request names commit %d, beyond the processed %d", s.RequestedAt, g.Cursor), nil
	case r.o.Clock.Now().Before(s.NotBefore):
		return ports.Member{}, keepFor("no readd before %v", s.NotBefore), nil
	}
	return leaf, nil, nil
}

// standing checks the conditions of FORK-080 that concern this
// installation's own standing in the group, on what tx reads: consent
// allowed, state active, a permitted readder. It returns the group and
// its state, or the decision to drop every request of the group.
func (r *Recovery) standing(ctx context.Context, tx ports.Tx, gid []byte) (ports.Group, ports.GroupView, *decision, error) {
	g, err := tx.Groups().Get(ctx, gid)
	if errors.Is(err, ports.ErrNotFound) {
		return g, ports.GroupView{}, dropFor("this client no longer holds the group"), nil
	}
	if err != nil {
		return g, ports.GroupView{}, nil, err
	}
	switch {
	case g.Consent != ports.ConsentAllowed:
		return g, ports.GroupView{}, dropFor("consent is not allowed"), nil
	case !g.Active:
		return g, ports.GroupView{}, dropFor("this installation is no longer a member"), nil
	}
	view, err := r.o.MLS.Group(ctx, tx, gid)
	if err != nil {
		return g, view, nil, err
	}
	permitted, err := readders(g.ConversationType, view)
	if err != nil {
		return g, view, nil, err
	}
	if !permitted[r.o.Installation.InboxID] {
		return g, view, dropFor("this inbox is not a permitted readder"), nil
	}
	return g, view, nil, nil
}

// readd answers one request: the version floor first (FORK-063), then the
// key package (FORK-062), then one commit that removes and adds the
// installation, built on the newest state after every check again.
func (r *Recovery) readd(ctx context.Context, gid []byte, leaf ports.Member) error {
	key := leaf.SignatureKey
	if err := r.raiseVersion(ctx, gid); err != nil {
		return err
	}
	kp, err := r.keyPackage(ctx, leaf.InboxID, key)
	if errors.Is(err, keypackage.ErrRejected) || errors.Is(err, ports.ErrNotFound) {
		return r.postpone(ctx, gid, key, err)
	}
	if err != nil {
		return err
	}
	seq, err := r.o.Host.Commit(ctx, gid, func(ctx context.Context, tx ports.Tx, view ports.GroupView) (ports.CommitOptions, []join.Recipient, error) {
		return r.buildReadd(ctx, tx, gid, key, kp)
	})
	var d *decision
	if errors.As(err, &d) {
		return r.decide(ctx, gid, key, d)
	}
	if errors.Is(err, ErrWelcomeNotStored) {
		// FORK-062: the readd is answered once its Welcome is stored; the
		// host keeps publishing it, and the request stays answered by this
		// commit (FORK-064), so no second readd removes the member again.
		r.o.Logger.Warn("readd welcome not stored yet", "group", fmt.Sprintf("%x", gid), "installation", fmt.Sprintf("%x", key), "err", err)
		r.emit(Event{Kind: ReaddWelcomePending, GroupID: gid, InstallationKey: key, CommitSequenceID: seq, Reason: err.Error()})
		return nil
	}
	if err != nil {
		return err
	}
	r.emit(Event{Kind: ReaddPublished, GroupID: gid, InstallationKey: key, CommitSequenceID: seq})
	return nil
}

// buildReadd checks the request again on the state the commit builds on,
// which processing may have moved, and returns the readd commit: the
// installation's leaf removed and its key package added (FORK-062).
func (r *Recovery) buildReadd(ctx context.Context, tx ports.Tx, gid, key []byte, kp keypackage.Validated) (ports.CommitOptions, []join.Recipient, error) {
	leaf, d, err := r.check(ctx, tx, gid, key)
	if err != nil {
		return ports.CommitOptions{}, nil, err
	}
	if d != nil {
		return ports.CommitOptions{}, nil, d
	}
	opts, rcpt := readdCommit(leaf, kp)
	return opts, rcpt, nil
}

// readdCommit is a readd commit: leaf removed and the key package kp,
// validated, added, with its Welcome's recipient (FORK-062).
func readdCommit(leaf ports.Member, kp keypackage.Validated) (ports.CommitOptions, []join.Recipient) {
	rcpt := join.Recipient{InstallationKey: kp.InstallationKey, Wrapper: kp.WrapperAlgorithm,
		WrapperPublicKey: kp.WrapperPublicKey, PointeeAEADs: kp.PointeeAEADs}
	return ports.CommitOptions{Remove: []uint32{leaf.LeafIndex}, Add: [][]byte{kp.KeyPackage}}, []join.Recipient{rcpt}
}

// keyPackage fetches the installation's newest key package and validates
// it under JOIN-007, JOIN-008 and JOIN-082 (and the addressing checks of
// JOIN-090). A package that fails wraps keypackage.ErrRejected; none
// served wraps ports.ErrNotFound.
func (r *Recovery) keyPackage(ctx context.Context, inbox string, key []byte) (keypackage.Validated, error) {
	st := ports.AssociationState{InboxID: inbox, InstallationKeys: [][]byte{key}}
	pk, err := r.validator.FetchInbox(ctx, r.o.Transport, st, r.o.Clock.Now())
	if errors.Is(err, keypackage.ErrNoUsableInstallation) && len(pk.Failed) == 1 {
		return keypackage.Validated{}, pk.Failed[0].Err
	}
	if err != nil {
		return keypackage.Validated{}, err
	}
	return pk.Usable[0], nil
}

// postpone records FORK-062's wait: no valid key package, so the
// installation is not removed, and no readd of it starts before the
// refresh interval has passed.
func (r *Recovery) postpone(ctx context.Context, gid, key []byte, cause error) error {
	until := r.o.Clock.Now().Add(r.o.RefreshInterval)
	err := r.tx(ctx, func(tx ports.Tx) error {
		return tx.Readds().Upsert(ctx, gid, key, func(s *ports.ReaddStatus) error {
			s.NotBefore, s.UpdatedAt = until, r.o.Clock.Now()
			return nil
		})
	})
	if err != nil {
		return err
	}
	r.o.Logger.Info("readd deferred: no valid key package", "group", fmt.Sprintf("%x", gid),
		"installation", fmt.Sprintf("%x", key), "until", until, "reason", cause)
	r.emit(Event{Kind: ReaddDeferred, GroupID: gid, InstallationKey: key, Reason: cause.Error()})
	return nil
}

// decideAll applies one decision to every request of a group.
func (r *Recovery) decideAll(ctx context.Context, gid []byte, reqs []ports.ReaddStatus, d *decision) error {
	var errs []error
	for _, s := range reqs {
		errs = append(errs, r.decide(ctx, gid, s.InstallationKey, d))
	}
	return errors.Join(errs...)
}

// decide applies a decision to one request: a dropped request is no
// longer kept; a kept one stays as it is.
func (r *Recovery) decide(ctx context.Context, gid, key []byte, d *decision) error {
	if d.v != drop {
		return nil
	}
	err := r.tx(ctx, func(tx ports.Tx) error {
		return tx.Readds().Upsert(ctx, gid, key, func(s *ports.ReaddStatus) error {
			s.Requested, s.UpdatedAt = false, r.o.Clock.Now()
			return nil
		})
	})
	if err != nil {
		return err
	}
	r.o.Logger.Info("readd request dropped", "group", fmt.Sprintf("%x", gid), "installation", fmt.Sprintf("%x", key), "reason", d.reason)
	r.emit(Event{Kind: RequestDropped, GroupID: gid, InstallationKey: key, Reason: d.reason})
	return nil
}

// raiseVersion commits the minimum protocol version [ReaddVersion] when
// the group's is absent, unreadable or lower (FORK-063, compared under
// CONF-050), before any readd commit.
func (r *Recovery) raiseVersion(ctx context.Context, gid []byte) error {
	var low bool
	if err := r.tx(ctx, func(tx ports.Tx) error {
		view, err := r.o.MLS.Group(ctx, tx, gid)
		low = err == nil && belowReaddVersion(view)
		return err
	}); err != nil || !low {
		return err
	}
	raised := &decision{v: act, reason: "raised meanwhile"}
	_, err := r.o.Host.Commit(ctx, gid, func(ctx context.Context, tx ports.Tx, view ports.GroupView) (ports.CommitOptions, []join.Recipient, error) {
		if !belowReaddVersion(view) {
			return ports.CommitOptions{}, nil, raised
		}
		d, err := metadata.FromExtensions(view.Extensions)
		if err != nil {
			return ports.CommitOptions{}, nil, err
		}
		exts, err := d.Set(metadata.ComponentMinProtocol, []byte(ReaddVersion.String())).Apply(view.Extensions)
		if err != nil {
			return ports.CommitOptions{}, nil, err
		}
		return ports.CommitOptions{GroupContextExtensions: exts}, nil, nil
	})
	if errors.Is(err, raised) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("raise the minimum protocol version to %v: %w", ReaddVersion, err)
	}
	return nil
}

// belowReaddVersion reports a minimum protocol version component that is
// absent, does not parse, or is lower than [ReaddVersion].
func belowReaddVersion(view ports.GroupView) bool {
	d, err := metadata.FromExtensions(view.Extensions)
	if err != nil {
		return true
	}
	v, ok, err := d.MinProtocolVersion()
	return err != nil || !ok || v.Compare(ReaddVersion) < 0
}
