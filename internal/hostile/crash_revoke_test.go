package hostile_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"
	"time"

	regroup "github.com/regroup-mls/regroup"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
)

// The environment that turns the test binary into the revoking child.
const (
	envRevokeStore  = "REGROUP_REVOKE_CHILD_STORE"
	envRevokeServer = "REGROUP_REVOKE_CHILD_SERVER"
	envRevokeKey    = "REGROUP_REVOKE_CHILD_KEY"
	envRevokeTarget = "REGROUP_REVOKE_CHILD_TARGET"
)

// TestCrashRevocation SIGKILLs alice's installation while it revokes
// one of her other installations with the recovery key, on a real
// regroupd over gRPC: each round the child publishes what an earlier
// round left pending (as a restarted client does), revokes the round's
// installation and waits; the kill lands before the update is stored,
// between storing and publishing it, or after. After the last restart
// (alice's client, which publishes pending updates as it starts) it
// checks that each revocation took effect once or not at all — the
// inbox's identity topic holds at most one revocation of each
// installation, none is left pending in alice's store — and that
// nothing else broke: alice and bob still agree in their group and a
// message of alice's reaches bob. make test runs 2 kills;
// REGROUP_CRASH_KILLS is the long mode.
func TestCrashRevocation(t *testing.T) {
	if path := os.Getenv(envRevokeStore); path != "" {
		revokeChild(path, os.Getenv(envRevokeServer), os.Getenv(envRevokeKey), os.Getenv(envRevokeTarget))
		return
	}
	w := world.NewFor(t, "sqlite", 3*time.Minute)
	alice := w.Member("alice", world.Config{})
	recovery := alice.C.Identity().RecoveryKey
	if recovery == nil {
		t.Fatal("a new inbox's client hands out no recovery key")
	}
	bob := w.Member("bob", world.Config{})
	kills := crashReaddKills()
	var phones [][]byte
	for i := 0; i < kills; i++ {
		p := w.Member(fmt.Sprintf("phone%d", i), world.Config{RecoveryKey: recovery})
		phones = append(phones, p.C.InstallationKey())
		p.Close()
	}
	cv, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Name: "g", Members: []string{bob.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	id := cv.ID()
	world.Round(alice, bob)
	alicePath := alice.Path
	alice.Close()

	r := rand.New(rand.NewPCG(61, 61))
	for round, phone := range phones {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestCrashRevocation$")
		cmd.Env = append(os.Environ(), envRevokeStore+"="+alicePath, envRevokeServer+"="+w.Regroupd.Addr,
			envRevokeKey+"="+hex.EncodeToString(recovery.Seed()), envRevokeTarget+"="+hex.EncodeToString(phone))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The child says when it starts revoking; the kill lands within
		// a few milliseconds of it: before the update is stored, between
		// storing and publishing it, or after.
		ready := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if sc.Text() == "revoking" {
					close(ready)
					break
				}
			}
			_, _ = io.Copy(io.Discard, out)
		}()
		select {
		case <-ready:
			time.Sleep(time.Duration(r.Int64N(int64(4 * time.Millisecond))))
		case <-time.After(20 * time.Second):
			t.Log("the child never started revoking")
		}
		_ = cmd.Process.Kill() // SIGKILL
		_ = cmd.Wait()
		t.Logf("kill %d", round)
	}

	alice2 := w.Member("alice", world.Config{})
	world.Round(alice2, bob)
	res, err := identity.NewResolver(identity.ResolverOptions{Store: bob.Store, Transport: bob.Transport, Clock: bob.Clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Sync(w.Ctx, alice2.C.InboxID()); err != nil {
		t.Fatal(err)
	}
	revokes := map[string]int{}
	bob.Tx(func(tx ports.Tx) error {
		recs, err := tx.IdentityCache().List(w.Ctx, alice2.C.InboxID(), ^uint64(0))
		for _, rec := range recs {
			if u, derr := identity.DecodeUpdate(rec.Update); derr == nil {
				if k := u.GetRevokeInstallation().GetInstallationKey(); k != nil {
					revokes[string(k)]++
				}
			}
		}
		return err
	})
	for i, p := range phones {
		if n := revokes[string(p)]; n > 1 {
			t.Errorf("phone%d revoked %d times: a revocation published twice", i, n)
		}
	}
	assoc, err := res.Associations(w.Ctx, alice2.C.InboxID())
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range phones {
		held := false
		for _, a := range assoc {
			held = held || bytes.Equal(a.InstallationKey, p)
		}
		if held == (revokes[string(p)] == 1) {
			t.Errorf("phone%d: associated %v with %d revocations on the topic", i, held, revokes[string(p)])
		}
	}
	if n := pendingUpdates(t, alice2); n != 0 {
		t.Errorf("alice's store still holds %d identity updates to publish after her restart", n)
	}
	if _, err := alice2.Conv(id).Send(w.Ctx, []byte("after the kills")); err != nil {
		t.Fatal(err)
	}
	world.Round(alice2, bob)
	if err := agree(id, alice2, bob); err != nil {
		t.Fatalf("after the last restart: %v", err)
	}
	t.Logf("revocations on the topic: %d of %d", len(revokes), len(phones))
}

// revokeChild is alice's installation until the parent kills it.
func revokeChild(path, server, seedHex, targetHex string) {
	ctx := context.Background()
	seed, err1 := hex.DecodeString(seedHex)
	target, err2 := hex.DecodeString(targetHex)
	if err1 != nil || err2 != nil || len(seed) != ed25519.SeedSize {
		os.Exit(2)
	}
	clk := regroup.ProvideClock(nil)
	store, closeStore, err := regroup.OpenSQLiteStore(ctx, path)
	if err != nil {
		os.Exit(2)
	}
	defer closeStore()
	in, err := regroup.ProvideInstallation(ctx, store, clk, regroup.IdentityConfig{})
	if err != nil {
		os.Exit(2)
	}
	tr, closeTr, err := regroup.DialTransport(server, nil, in)
	if err != nil {
		os.Exit(2)
	}
	defer closeTr()
	opts := identity.Options{Store: store, Transport: tr, Clock: clk}
	_, _ = identity.PublishPending(ctx, opts)
	fmt.Println("revoking")
	_, _ = identity.Revoke(ctx, opts, ed25519.NewKeyFromSeed(seed), target)
	for {
		time.Sleep(10 * time.Millisecond)
	}
}

// pendingUpdates counts the identity updates m's store holds to publish.
func pendingUpdates(t *testing.T, m *world.Member) int {
	t.Helper()
	n := 0
	m.Tx(func(tx ports.Tx) error {
		keys, err := tx.Blobs().Keys(m.W.Ctx, identity.BlobNamespace, "pending/")
		n = len(keys)
		return err
	})
	return n
}
