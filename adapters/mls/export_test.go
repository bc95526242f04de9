package mls

import (
	"bytes"
	"context"
	"errors"

	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/ports"
)

// LoadGroup reads a group's stored state as the engine does, for tests
// that drive it with package group.
func (e *Engine) LoadGroup(ctx context.Context, tx ports.Tx, groupID []byte) (*group.Group, error) {
	return e.load(ctx, tx, groupID)
}

// CheckStagedBlob reads a staged Welcome's blob (in parts) as the engine
// does, and fails unless encodeStaged, which writes each part from a
// slice of its own, writes the same bytes back and its state loads.
func CheckStagedBlob(b []byte) error {
	s, err := decodeStaged(b)
	if err != nil {
		return err
	}
	if s.tag == nil {
		return errors.New("not a staged Welcome in parts")
	}
	out, err := encodeStaged(s)
	if err != nil {
		return err
	}
	if !bytes.Equal(out, b) {
		return errors.New("encoded back to other bytes")
	}
	_, err = s.decodeState()
	return err
}
