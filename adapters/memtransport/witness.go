package memtransport

import (
	"context"
	"fmt"

	"github.com/regroup-mls/regroup/ports"
)

var _ ports.Witness = (*Transport)(nil)

// Report implements [ports.Witness]; the service must implement
// [ports.DeliveryWitness].
func (t *Transport) Report(ctx context.Context, r ports.Report) error {
	if err := ctxErr(ctx, "report"); err != nil {
		return err
	}
	w, ok := t.svc.(ports.DeliveryWitness)
	if !ok {
		return fmt.Errorf("report: %w: the delivery service takes no reports", ports.ErrInvalidArgument)
	}
	r.GroupID = append([]byte(nil), r.GroupID...)
	return w.Report(ctx, t.caller, r)
}

// Lift implements [ports.Witness].
func (t *Transport) Lift(ctx context.Context, l ports.Lift) error {
	if err := ctxErr(ctx, "lift"); err != nil {
		return err
	}
	w, ok := t.svc.(ports.DeliveryWitness)
	if !ok {
		return fmt.Errorf("lift: %w: the delivery service takes no lifts", ports.ErrInvalidArgument)
	}
	l = ports.Lift{GroupID: append([]byte(nil), l.GroupID...), InboxID: append([]byte(nil), l.InboxID...),
		InstallationKey: append([]byte(nil), l.InstallationKey...)}
	return w.Lift(ctx, t.caller, l)
}
