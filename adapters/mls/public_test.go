package mls_test

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls"
)

// TestPublicGroupsConcurrentApply (COMP-312): one validator applying the
// same commit to the same cached state from several goroutines at once
// computes the same next state in each; run under -race, it also shows
// that a cached state is never written while shared.
func TestPublicGroupsConcurrentApply(t *testing.T) {
	s := newPublicSeed(t)
	ctx := context.Background()
	for _, opts := range []*mls.PublicOptions{nil, {CacheBytes: 1}} { // a shared cache, and one too small to keep anything
		pub := mls.NewPublicGroups(opts)
		want, err := pub.Apply(ctx, s.state, s.commit)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() {
				pc, err := pub.Apply(ctx, s.state, s.commit)
				if err == nil && !bytes.Equal(pc.Next.State, want.Next.State) {
					t.Error("concurrent Apply computed another next state")
				}
				if err == nil {
					err = pub.CheckGroupInfo(ctx, pc.Next.State, s.nextGroupInfo)
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}
