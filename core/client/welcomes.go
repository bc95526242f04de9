package client

import (
	"context"

	"github.com/regroup-mls/regroup/core/join"
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

// onJoined reports a joined group and subscribes to its topics.
func (c *Client) onJoined(j join.Joined) {
	c.events.emit(JoinedEvent{GroupID: j.GroupID, ConversationType: j.ConversationType, AdderInbox: j.Adder.InboxID,
		AdderInstallation: j.Adder.SignatureKey, Rejoined: j.Replaced})
	c.wakeWorkers()
}
