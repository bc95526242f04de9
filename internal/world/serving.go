package world

import (
	"testing"
	"time"
)

// WaitServing syncs m until a restarted regroupd answers, for at most ten
// seconds.
func WaitServing(t testing.TB, m *Member) {
	t.Helper()
	var err error
	for i := 0; i < 100; i++ {
		if err = m.C.SyncAll(m.W.Ctx); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: regroupd not serving after the restore: %v", m.Name, err)
}
