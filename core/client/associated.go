package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/core/policy"
	"github.com/regroup-mls/regroup/ports"
)

// needIdentity stops a batch whose commit adds an installation of an inbox
// whose identity updates this client does not hold through the sequence id
// the commit's GROUP_MEMBERSHIP names (or, at sequence id 0, whose newest
// state it has not fetched in this pass, for an external commit): the
// updates are fetched outside the transaction, and the batch is processed
// again (COMP-238, see checkAdded; COMP-400, see associatedIn).
type needIdentity struct{ states []ports.IdentityRequest }

func (n *needIdentity) Error() string {
	return fmt.Sprintf("identity updates of %d inboxes are not held yet", len(n.states))
}

// fetchedIdentities are the inbox states a pass fetched for checkAdded,
// so that a state the delivery service does not hold is decided, not
// fetched for ever. It is emptied at the end of every group pass.
type fetchedIdentities struct {
	mu sync.Mutex
	m  map[string]bool
}

func identityKey(inbox string, seq uint64) string { return inbox + "@" + strconv.FormatUint(seq, 10) }

func (f *fetchedIdentities) has(inbox string, seq uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m[identityKey(inbox, seq)]
}

func (f *fetchedIdentities) add(inbox string, seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]bool{}
	}
	f.m[identityKey(inbox, seq)] = true
}

func (f *fetchedIdentities) forget(inbox string, seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, identityKey(inbox, seq))
}

// checkAdded requires every installation a commit adds to be associated
// with its leaf's inbox in that inbox's association state at the identity
// sequence id the commit's GROUP_MEMBERSHIP names — JOIN-052's check,
// applied by every member to every commit (GMOD-012, COMP-238): a member
// cannot place a leaf under another member's identity by an Add. It reads the identity updates
// this client holds, in tx; when they do not reach that sequence id it
// returns a [*needIdentity], and the caller fetches them outside the
// transaction and processes the commit again. A state the delivery service
// holds no update for, once fetched, refuses the commit.
func (c *Client) checkAdded(ctx context.Context, tx ports.Tx, after ports.GroupView, ch policy.Change) error {
	if len(ch.Added) == 0 {
		return nil
	}
	d, err := metadata.FromExtensions(after.Extensions)
	if err != nil {
		return fmt.Errorf("%w: %v", policy.ErrNotPermitted, err)
	}
	mem, err := d.Membership()
	if err != nil {
		return fmt.Errorf("%w: %v", policy.ErrNotPermitted, err)
	}
	var need needIdentity
	for _, m := range ch.Added {
		e, ok := mem[m.InboxID]
		if !ok {
			return fmt.Errorf("%w: GROUP_MEMBERSHIP has no entry for %s", policy.ErrNotPermitted, m.InboxID)
		}
		seq := e.GetSequenceId()
		highest, err := tx.IdentityCache().Highest(ctx, m.InboxID)
		if err != nil && !errors.Is(err, ports.ErrNotFound) {
			return err
		}
		if highest < seq && !c.fetched.has(m.InboxID, seq) {
			need.states = append(need.states, ports.IdentityRequest{InboxID: m.InboxID, SequenceID: seq})
			continue
		}
		recs, err := tx.IdentityCache().List(ctx, m.InboxID, seq)
		if err != nil {
			return err
		}
		st := identity.Fold(m.InboxID, recs, seq)
		if !slices.ContainsFunc(st.InstallationKeys, func(k []byte) bool { return bytes.Equal(k, m.SignatureKey) }) {
			return fmt.Errorf("%w: installation %x is not associated with inbox %s at identity sequence id %d",
				policy.ErrNotPermitted, m.SignatureKey, m.InboxID, seq)
		}
	}
	if len(need.states) > 0 {
		return &need
	}
	return nil
}

// associatedIn is the association check of an external commit's joiner
// (COMP-400): the installation must be associated with its inbox in the
// newest association state the delivery service reports, which is
// fetched once per group pass (a [*needIdentity] with sequence id 0) and
// then read from the updates this client holds, in tx.
func (c *Client) associatedIn(ctx context.Context, tx ports.Tx) policy.Associated {
	return func(inbox string, key []byte) (bool, error) {
		if !c.fetched.has(inbox, 0) {
			return false, &needIdentity{states: []ports.IdentityRequest{{InboxID: inbox}}}
		}
		highest, err := tx.IdentityCache().Highest(ctx, inbox)
		if errors.Is(err, ports.ErrNotFound) || (err == nil && highest == 0) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		recs, err := tx.IdentityCache().List(ctx, inbox, highest)
		if err != nil {
			return false, err
		}
		st := identity.Fold(inbox, recs, highest)
		return slices.ContainsFunc(st.InstallationKeys, func(k []byte) bool { return bytes.Equal(k, key) }), nil
	}
}

// resolveIdentity fetches the identity updates a [*needIdentity] names,
// outside any transaction, and remembers that it did; it returns a
// function that forgets them again.
func (c *Client) resolveIdentity(ctx context.Context, n *needIdentity) (forget func(), err error) {
	for _, q := range n.states {
		var err error
		if q.SequenceID == 0 { // the newest state the delivery service reports
			_, err = c.resolveInbox(ctx, q.InboxID)
		} else {
			_, err = c.deps.Identity.AssociationState(ctx, q.InboxID, q.SequenceID)
		}
		if err != nil && !errors.Is(err, ports.ErrNotFound) {
			return func() {}, fmt.Errorf("identity of an added installation: %w", err)
		}
		c.fetched.add(q.InboxID, q.SequenceID)
	}
	return func() {
		for _, q := range n.states {
			c.fetched.forget(q.InboxID, q.SequenceID)
		}
	}, nil
}
