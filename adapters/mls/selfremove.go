package mls

import (
	"context"
	"errors"
	"fmt"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/ports"
)

var _ ports.MLSSelfRemove = (*Engine)(nil)

// ProposeSelfRemove proposes this installation's removal with the draft
// SelfRemove proposal (COMP-304) and saves the group, which keeps the
// proposal cached for the epoch.
func (e *Engine) ProposeSelfRemove(ctx context.Context, tx ports.Tx, groupID []byte) ([]byte, error) {
	g, err := e.active(ctx, tx, groupID)
	if err != nil {
		return nil, err
	}
	m, err := g.ProposeSelfRemove()
	switch {
	case errors.Is(err, group.ErrUnsupported):
		return nil, fmt.Errorf("%w: %v", ports.ErrUnsupported, err)
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ports.ErrInvalid, err)
	}
	b, err := codec.Marshal(m)
	if err != nil {
		return nil, err
	}
	if _, err := e.save(ctx, tx, g); err != nil {
		return nil, err
	}
	return b, nil
}
