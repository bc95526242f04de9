package client

import (
	"context"

	"github.com/regroup-mls/regroup/core/join"
	"github.com/regroup-mls/regroup/ports"
)

// welcomeCursor returns this installation's welcome topic and the
// sequence id of the last envelope processed on it.
func (c *Client) welcomeCursor(ctx context.Context) ([]byte, uint64, error) {
	cur, err := c.receiver.Cursor(ctx)
	return c.receiver.Topic(), cur, err
}

// processWelcomes processes the installation's welcome topic from the
// stored cursor.
func (c *Client) processWelcomes(ctx context.Context) error {
	return c.receiver.Process(ctx)
}

// retryWelcomes attempts every held Welcome again (JOIN-084, JOIN-085,
// JOIN-092).
func (c *Client) retryWelcomes(ctx context.Context) error {
	return c.receiver.RetryHeld(ctx)
}

// catchUp processes a group's topic for a Welcome that waits for the
// commit that removed this installation (JOIN-092). The receiver calls it
// outside its own transactions.
func (c *Client) catchUp(ctx context.Context, groupID []byte) error {
	defer c.lock(groupID)()
	return c.processGroup(ctx, groupID)
}

// onWelcome reports a Welcome held for a later attempt or rejected.
func (c *Client) onWelcome(o join.Outcome) {
	c.events.emit(WelcomeEvent{SequenceID: o.SequenceID, GroupID: o.GroupID, Held: o.Held, Rejected: o.Rejected,
		Reason: o.Rule + ": " + o.Reason})
}

// onJoined reports a joined group and subscribes to its topics. A
// Welcome that replaced held state began a new membership whose fork
// state is unknown (FORK-041), which is reported too.
func (c *Client) onJoined(j join.Joined) {
	c.events.emit(JoinedEvent{GroupID: j.GroupID, ConversationType: j.ConversationType, AdderInbox: j.Adder.InboxID,
		AdderInstallation: j.Adder.SignatureKey, Anchor: j.Anchor, Epoch: j.Epoch, Rejoined: j.Replaced})
	if j.Replaced {
		c.events.emit(ForkStateEvent{GroupID: j.GroupID, State: ports.ForkUnknown})
		c.acc.due(j.GroupID) // a stuck record the Welcome ended goes at the next pass (COMP-441)
	}
	c.wakeWorkers()
}

// onOneshot hands a one-shot Welcome's message to the recovery
// (FORK-052) and, when it kept a request, schedules a response.
func (c *Client) onOneshot(ctx context.Context, o join.Oneshot) error {
	if err := c.rec.OnOneshot(ctx, o); err != nil {
		return err
	}
	c.recoveryDue()
	return nil
}

// HeldWelcomes lists the Welcomes held for a later attempt, in sequence id
// order, with the reason and deadline of each.
func (c *Client) HeldWelcomes(ctx context.Context) ([]ports.HeldWelcome, error) {
	return c.receiver.Held(ctx)
}

// RejectedWelcomes lists the recorded terminal rejections of Welcomes
// (JOIN-048), in sequence id order.
func (c *Client) RejectedWelcomes(ctx context.Context) ([]join.RejectedWelcome, error) {
	return c.receiver.Rejected(ctx)
}
