package client

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/ports"
)

// A delivery service restored from a backup without its restore mode
// hands out sequence ids again: ids above the restored database's counter
// that this client already read up to (COMP-466). New envelopes then sit
// at or below the group's stored cursor, where no read after the cursor
// finds them. The client notices it in two ways, both impossible from a
// service that keeps COMP-041:
//
//   - the topic's highest id, as the service reports it, is below the
//     stored cursor (a sync's batched read);
//   - a publish of this client to the topic was given an id at or below
//     the stored cursor (API-289: a publish that starts after an envelope
//     is visible gets a higher id).
//
// It then reads the topic again from its start. Moving the stored cursor
// back moves it over nothing (COMP-240 bounds only moves forward), and
// the envelopes read again are handled as on any read: what the engine
// cannot open again (messages and commits of past epochs) is junk, an own
// message is recognised by its hash, and a new message at a reissued id
// is processed and stored beside the old one at that id. The junk below
// the cursor the client held when it noticed — the replay mark, kept in
// Blobs — was evaluated before: it is neither recorded as a refused
// commit (FORK-002) nor reported as a missed message.
const nsReplay = "client.replay"

// rewind moves the group's stored cursor back to the topic's start after
// the service was seen to reissue ids, keeping the highest cursor held as
// the replay mark, and forgets the in-memory read positions past it.
func (c *Client) rewind(ctx context.Context, tx ports.Tx, g ports.Group, why string) error {
	if g.Cursor == 0 {
		return nil
	}
	mark, err := replayMark(ctx, tx, g.ID)
	if err != nil {
		return err
	}
	if g.Cursor > mark {
		if err := tx.Blobs().Put(ctx, nsReplay, hex.EncodeToString(g.ID), binary.BigEndian.AppendUint64(nil, g.Cursor)); err != nil {
			return err
		}
	}
	if err := tx.Groups().Update(ctx, g.ID, func(gr *ports.Group) error {
		gr.Cursor = 0
		gr.UpdatedAt = c.deps.Clock.Now()
		return nil
	}); err != nil {
		return err
	}
	c.tails.Forget(string(g.ID))
	c.logger.Warn("delivery service reissued sequence ids: reading the group again from its start",
		"group", fmt.Sprintf("%x", g.ID), "cursor", g.Cursor, "evidence", why)
	return nil
}

// rewindGroup is rewind in a transaction of its own, on the stored group.
func (c *Client) rewindGroup(ctx context.Context, groupID []byte, why string) error {
	return c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		g, err := tx.Groups().Get(ctx, groupID)
		if err != nil {
			return err
		}
		return c.rewind(ctx, tx, g, why)
	})
}

// replayMark returns the group's replay mark, 0 when it has none.
func replayMark(ctx context.Context, tx ports.Tx, groupID []byte) (uint64, error) {
	v, err := tx.Blobs().Get(ctx, nsReplay, hex.EncodeToString(groupID))
	if err != nil {
		if errors.Is(err, ports.ErrNotFound) {
			return 0, nil
		}
		return 0, err
	}
	if len(v) != 8 {
		return 0, nil
	}
	return binary.BigEndian.Uint64(v), nil
}

// recheckKeysOnNewSession has the key-package manager check, at its next
// tick, that the service still serves this installation's package when
// the transport authenticated anew since the last sync: the service may
// have come back restored from a backup, which deletes every stored key
// package (COMP-463).
func (c *Client) recheckKeysOnNewSession() {
	sc, ok := c.deps.Transport.(ports.SessionCounter)
	if !ok {
		return
	}
	if n := sc.Sessions(); c.sessions.Swap(n) != n {
		c.keys.RecheckServed()
	}
}
