package mls_test

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/ports"
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

// TestCOMP310_ReInitAndPSKCommitsAreRefused: a member's commit carrying a
// ReInit, or a PreSharedKey proposal, valid as RFC 9420 goes, is refused
// with reason proposal.
func TestCOMP310_ReInitAndPSKCommitsAreRefused(t *testing.T) {
	ctx := context.Background()
	a := newInstallationTB(t, "inbox-a")
	gid := []byte("public-reinit")
	if _, err := a.engine.CreateGroup(ctx, a.tx, gid, a.keyPackageTB(t), nil); err != nil {
		t.Fatal(err)
	}
	gi, err := a.engine.GroupInfo(ctx, a.tx, gid)
	if err != nil {
		t.Fatal(err)
	}
	pub := mls.NewPublicGroups(nil)
	st, err := pub.Open(ctx, gi)
	if err != nil {
		t.Fatal(err)
	}
	g, err := a.engine.LoadGroup(ctx, a.tx, gid)
	if err != nil {
		t.Fatal(err)
	}
	gc := g.GroupContext()
	nonce := bytes.Repeat([]byte{1}, 32)
	for name, pr := range map[string]*message.Proposal{
		"reinit": {Type: message.ProposalReInit, ReInit: &message.ReInit{GroupID: []byte("successor"), Version: gc.Version, CipherSuite: gc.CipherSuite, Extensions: message.Extensions{}}},
		"psk": {Type: message.ProposalPreSharedKey, PreSharedKey: &message.PreSharedKey{PSK: message.PreSharedKeyID{
			Type: message.PSKResumption, Usage: message.UsageApplication, GroupID: gid, Epoch: 0, Nonce: nonce}}},
	} {
		p, err := g.Clone().Commit(&group.CommitOptions{Proposals: []*message.Proposal{pr}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		commit, err := codec.Marshal(p.Message)
		if err != nil {
			t.Fatal(err)
		}
		_, err = pub.Apply(ctx, st.State, commit)
		if ports.RefusalReason(err) != ports.RefusedProposal {
			t.Fatalf("%s: Apply: %v, want a refusal as proposal", name, err)
		}
	}
}
