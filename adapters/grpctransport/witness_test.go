package grpctransport

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

// COMP-419: ErrCommitPending and ErrQuarantined keep their classes
// across the gRPC hop, apart from ErrEpochConflict (the same code,
// Aborted) and from a plain invalid argument (which ErrQuarantined
// wraps).
func TestCOMP419_TwoPhaseErrorClassesCrossGRPC(t *testing.T) {
	back := func(err error) error { return FromStatus(context.Background(), "publish", ToStatus(err)) }
	pending := back(fmt.Errorf("envelope 0: %w: group 01: commit 7 is pending", ports.ErrCommitPending))
	if !errors.Is(pending, ports.ErrCommitPending) || errors.Is(pending, ports.ErrEpochConflict) || errors.Is(pending, ports.ErrInvalidArgument) {
		t.Fatalf("ErrCommitPending came back as %v", pending)
	}
	conflict := back(fmt.Errorf("envelope 0: %w", ports.ErrEpochConflict))
	if !errors.Is(conflict, ports.ErrEpochConflict) || errors.Is(conflict, ports.ErrCommitPending) {
		t.Fatalf("ErrEpochConflict came back as %v", conflict)
	}
	q := back(fmt.Errorf("envelope 0: %w: group 01: inbox x", ports.ErrQuarantined))
	if !errors.Is(q, ports.ErrQuarantined) || !errors.Is(q, ports.ErrInvalidArgument) {
		t.Fatalf("ErrQuarantined came back as %v", q)
	}
	b := back(fmt.Errorf("envelope 0: %w: group 01: installation x", ports.ErrBlocked)) // COMP-501
	if !errors.Is(b, ports.ErrBlocked) || errors.Is(b, ports.ErrQuarantined) || !errors.Is(b, ports.ErrInvalidArgument) {
		t.Fatalf("ErrBlocked came back as %v", b)
	}
	plain := back(fmt.Errorf("%w: no", ports.ErrInvalidArgument))
	if errors.Is(plain, ports.ErrQuarantined) || !errors.Is(plain, ports.ErrInvalidArgument) {
		t.Fatalf("a plain invalid argument came back as %v", plain)
	}
}
