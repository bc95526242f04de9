package mls_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/ports"
)

// TestPublicGroupsView (COMP-380): View reads a stored state back as the
// view Open and Apply reported for it, from a validator that never saw
// the state (an empty cache, as after a restart) as well as from the one
// that computed it; bytes that are no state wrap ports.ErrPublicState.
func TestPublicGroupsView(t *testing.T) {
	s := newPublicSeed(t)
	ctx := context.Background()
	pub := mls.NewPublicGroups(nil)
	opened, err := pub.Open(ctx, s.groupInfo)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := pub.Apply(ctx, opened.State, s.commit)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []*mls.PublicGroups{pub, mls.NewPublicGroups(&mls.PublicOptions{CacheBytes: -1})} {
		for _, ps := range []ports.PublicState{opened, pc.Next} {
			got, err := v.View(ctx, ps.State)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, ps.View) {
				t.Fatalf("View of epoch %d differs from the view its state was returned with", ps.View.Epoch)
			}
		}
	}
	if _, err := pub.View(ctx, []byte("not a state")); !errors.Is(err, ports.ErrPublicState) {
		t.Fatalf("View of garbage: %v, want ErrPublicState", err)
	}
}
