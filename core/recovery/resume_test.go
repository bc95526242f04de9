package recovery_test

import (
	"context"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/recovery"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/mlsfault"
)

// COMP-275, COMP-276, FORK-051: a requester that stops after it recorded
// its readd request and before the one-shot group was made (COMP-276: its
// in-flight record clears the mark and the request is sent again), before
// the one-shot group's add commit was published, or
// after the commit merged and before its Welcomes were published,
// delivers the request after a restart: the sync settles the one-shot
// group's stored commit intent (nothing else processes a one-shot
// group). The readder receives the request, and the requester made one
// one-shot group for the fork; when the resumed Welcomes are refused
// (nobody holds one), the mark is cleared and the request sent again.
func TestCOMP275_RequesterCrashMidSendDelivers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		at     ports.TopicKind
		refuse bool // the resumed Welcomes are refused: nobody holds one
	}{
		{"before the one-shot group is made", ports.TopicKeyPackages, false},
		{"before the commit is published", ports.TopicGroupMessages, false},
		{"before the welcomes are published", ports.TopicWelcomes, false},
		{"resumed welcomes refused", ports.TopicWelcomes, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := world.New(t, "embedded")
			var ft *faultTransport
			clk := clock.NewFake(time.Now())
			alice := w.Member("alice", world.Config{Options: &client.Options{Recovery: client.RecoveryPolicy{DisableResponses: true}}})
			bob := w.Member("bob", world.Config{Options: requester, Clock: clk,
				Transport: func(tr ports.Transport) ports.Transport { ft = wrapFaults(tr); return ft }})
			id := group(t, alice, bob)

			bob.Engine.Arm(id, mlsfault.MisrecordAuthenticator)
			commit(t, alice, id)
			ctx, kill := context.WithCancel(w.Ctx)
			defer kill()
			ft.mu.Lock()
			ft.crashSpare = key(bob)
			ft.mu.Unlock()
			ft.crashAt(tc.at, kill)
			_ = bob.C.SyncAll(ctx) // killed part way through the send
			if st := status(t, bob, id, key(bob)); !st.Requested {
				t.Fatalf("bob's mark before the crash point: %+v; want it recorded", st)
			}
			alice.Sync()
			if st := status(t, alice, id, key(bob)); st.Requested {
				t.Fatalf("alice holds the request before bob's restart: %+v", st)
			}

			bob.Restart(requester)
			want := 1
			if tc.refuse {
				ft.failWelcomes(publishFault{err: ports.ErrInvalidArgument})
				bob.Sync()
				if st := status(t, bob, id, key(bob)); st.Requested {
					t.Fatalf("bob kept the mark of a request that reached nobody: %+v", st)
				}
				clk.Advance(recovery.DefaultRetryDelay)
				want = 2 // the refused one-shot group and the request sent again
			}
			for i := 0; i < 3; i++ {
				bob.Sync()
				clk.Advance(recovery.DefaultRetryDelay)
			}
			alice.Sync()
			if st := status(t, alice, id, key(bob)); !st.Requested {
				t.Fatalf("the request never reached alice after bob's restart: %+v", st)
			}
			if n := len(oneshots(t, bob)); n != want {
				t.Fatalf("bob made %d one-shot groups; want %d (FORK-051)", n, want)
			}
		})
	}
}
