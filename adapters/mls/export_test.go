package mls

import (
	"context"

	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/ports"
)

// LoadGroup reads a group's stored state as the engine does, for tests
// that drive it with package group.
func (e *Engine) LoadGroup(ctx context.Context, tx ports.Tx, groupID []byte) (*group.Group, error) {
	return e.load(ctx, tx, groupID)
}
