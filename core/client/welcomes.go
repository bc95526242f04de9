package client

import (
	"context"
	"encoding/binary"
	"errors"

	"github.com/regroup-mls/regroup/core/join"
	"github.com/regroup-mls/regroup/ports"
)

const (
	nsCursor         = "client.cursor"
	keyWelcomeCursor = "welcomes"
)

// welcomeCursor returns this installation's welcome topic and the
// sequence id of the last envelope processed on it.
func (c *Client) welcomeCursor(ctx context.Context) ([]byte, uint64, error) {
	var cur uint64
	err := c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		b, err := tx.Blobs().Get(ctx, nsCursor, keyWelcomeCursor)
		if errors.Is(err, ports.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(b) == 8 {
			cur = binary.BigEndian.Uint64(b)
		}
		return nil
	})
	return join.WelcomeTopic(c.InstallationKey()), cur, err
}

// processWelcomes processes the installation's welcome topic from the
// stored cursor.
func (c *Client) processWelcomes(ctx context.Context) error {
	return nil
}
