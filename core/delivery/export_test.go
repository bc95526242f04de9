package delivery

import "context"

// ForgetCatchUp drops what the service remembers of groups it saw out of
// catch-up, as a restart after a restore does: tests that restore the
// store under a running service call it in place of the restart.
func (s *Service) ForgetCatchUp() { s.notCatchingUp.Clear() }

// RevokedIn is revokedIn, for the benchmark of the check's cost.
func (s *Service) RevokedIn(ctx context.Context, inbox string, key []byte) (bool, error) {
	return s.revokedIn(ctx, inbox, key)
}
