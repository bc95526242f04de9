package delivery

import (
	"context"
	"fmt"

	"github.com/regroup-mls/regroup/internal/fairshare"
	"github.com/regroup-mls/regroup/ports"
)

// The read budget bounds the bytes of stored envelopes that reads hold in
// memory across the service (COMP-140). It is shared fairly: a read is
// charged to the principals its ctx carries (the transport names them
// with fairshare.WithPrincipals: its connection, installation key and
// source address, COMP-321) as well as to the whole budget, so a
// principal whose reader stopped taking envelopes waits on its own share
// and the others keep reading.

// ReadBudgetInUse returns the bytes of stored envelopes that reads hold
// now (see [Options.ReadBudgetBytes]), and bytes held for responses the
// transport has not yet written ([Service.HoldRead]); operators export it
// as a gauge.
func (s *Service) ReadBudgetInUse() int64 { return s.budget.InUse() }

// ReadBudgetWaits returns, per principal kind ("global" for the whole
// budget), how many reads waited because that share was full.
func (s *Service) ReadBudgetWaits() map[string]int64 { return s.budget.Waits() }

// HoldRead holds n bytes of the read budget for the principals ctx
// carries, waiting within ctx, until release is called: a transport
// counts the responses it has queued but not yet written to the network
// (COMP-322). It fails with an error wrapping [ports.ErrUnavailable] when
// ctx ends first.
func (s *Service) HoldRead(ctx context.Context, n int64) (release func(), err error) {
	h, err := s.budget.Acquire(ctx, fairshare.From(ctx), n)
	if err != nil {
		return nil, fmt.Errorf("%w: waiting for read budget: %w", ports.ErrUnavailable, err)
	}
	return h.Close, nil
}

// newHold returns an empty hold for the principals ctx carries.
func (s *Service) newHold(ctx context.Context) *fairshare.Hold {
	h, _ := s.budget.Acquire(ctx, fairshare.From(ctx), 0) // holding 0 bytes never waits
	return h
}
