package mls_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/ports"
)

// publicSeed is a two-member group's public state at epoch 1 with a
// commit for it, its GroupInfo and the next epoch's.
type publicSeed struct {
	state, commit, groupInfo, nextGroupInfo []byte
}

func newPublicSeed(t testing.TB) publicSeed {
	t.Helper()
	ctx := context.Background()
	a, b := newInstallationTB(t, "inbox-a"), newInstallationTB(t, "inbox-b")
	gid := []byte("public-fuzz")
	if _, err := a.engine.CreateGroup(ctx, a.tx, gid, a.keyPackageTB(t), nil); err != nil {
		t.Fatal(err)
	}
	_, err := a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{Add: [][]byte{b.keyPackageTB(t).KeyPackage}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.engine.MergePending(ctx, a.tx, gid); err != nil {
		t.Fatal(err)
	}
	var s publicSeed
	if s.groupInfo, err = a.engine.GroupInfo(ctx, a.tx, gid); err != nil {
		t.Fatal(err)
	}
	st, err := mls.NewPublicGroups(nil).Open(ctx, s.groupInfo)
	if err != nil {
		t.Fatal(err)
	}
	s.state = st.State
	c, err := a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{ForcePath: true})
	if err != nil {
		t.Fatal(err)
	}
	s.commit, s.nextGroupInfo = c.Commit, c.GroupInfo
	return s
}

// wantRefusal fails unless err is nil or a *ports.PublicRefusal.
func wantRefusal(t *testing.T, what string, err error) {
	t.Helper()
	var r *ports.PublicRefusal
	if err != nil && !errors.As(err, &r) {
		t.Fatalf("%s: %v is no *ports.PublicRefusal", what, err)
	}
}

// FuzzPublicState (COMP-312) feeds arbitrary bytes to the public state
// decoder: it never panics, fails only with group.ErrPublicState, and what
// it accepts encodes back to the same bytes. Through the port, a state
// that does not decode fails Apply with ports.ErrPublicState and no
// refusal.
func FuzzPublicState(f *testing.F) {
	s := newPublicSeed(f)
	f.Add(s.state)
	f.Add(s.state[:40])
	f.Add([]byte{group.PublicStateVersion, 0, 3})
	pub := mls.NewPublicGroups(&mls.PublicOptions{CacheBytes: -1})
	f.Fuzz(func(t *testing.T, in []byte) {
		g, err := group.LoadPublic(in)
		if err != nil {
			if !errors.Is(err, group.ErrPublicState) {
				t.Fatalf("decoder failed with %v, not ErrPublicState", err)
			}
			if _, err := pub.Apply(context.Background(), in, s.commit); !errors.Is(err, ports.ErrPublicState) || ports.RefusalReason(err) != "" {
				t.Fatalf("Apply on an undecodable state: %v", err)
			}
			return
		}
		out, err := g.MarshalPublic()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, in) {
			t.Fatalf("decoded %x, encoded back %x", in, out)
		}
	})
}

// FuzzPublicApply (COMP-310) feeds hostile commits to Apply on a real
// public state: it never panics and every failure is a refusal with a
// reason.
func FuzzPublicApply(f *testing.F) {
	s := newPublicSeed(f)
	f.Add(s.commit)
	f.Add(s.groupInfo)
	pub := mls.NewPublicGroups(nil)
	f.Fuzz(func(t *testing.T, in []byte) {
		pc, err := pub.Apply(context.Background(), s.state, in)
		wantRefusal(t, "Apply", err)
		if err == nil && pc.Next.View.Epoch != 2 {
			t.Fatalf("accepted a commit to epoch %d", pc.Next.View.Epoch)
		}
	})
}

// FuzzPublicGroupInfo (COMP-313) feeds hostile GroupInfo messages to Open
// and CheckGroupInfo: neither panics, and every failure is a refusal.
func FuzzPublicGroupInfo(f *testing.F) {
	s := newPublicSeed(f)
	f.Add(s.groupInfo)
	f.Add(s.nextGroupInfo)
	pub := mls.NewPublicGroups(nil)
	f.Fuzz(func(t *testing.T, in []byte) {
		_, err := pub.Open(context.Background(), in)
		wantRefusal(t, "Open", err)
		wantRefusal(t, "CheckGroupInfo", pub.CheckGroupInfo(context.Background(), s.state, in))
	})
}
