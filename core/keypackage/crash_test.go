package keypackage_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/adapters/grpctransport"
	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/core/keypackage"
)

const (
	envCrashAddr    = "REGROUP_KP_CRASH_ADDR"
	envCrashDB      = "REGROUP_KP_CRASH_DB"
	envCrashLocator = "REGROUP_KP_CRASH_LOCATOR"
	envCrashReady   = "REGROUP_KP_CRASH_READY"
)

// crashChild rotates this installation's key package over gRPC for ever,
// destroying superseded keys as soon as they are due (no delay), until the
// parent kills it.
func crashChild(t *testing.T) {
	ctx := context.Background()
	store, err := openClientStore(ctx, os.Getenv(envCrashDB), os.Getenv(envCrashLocator))
	if err != nil {
		t.Fatal(err)
	}
	id, err := identity.Load(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := grpctransport.Dial(os.Getenv(envCrashAddr), &grpctransport.ClientOptions{InstallationKey: id.InstallationKey})
	if err != nil {
		t.Fatal(err)
	}
	engine, _ := mls.New(mls.Options{SignaturePrivateKey: id.InstallationKey.Seed()})
	res, _ := identity.NewResolver(identity.ResolverOptions{Store: store, Transport: tr, Clock: clock.System{}})
	mgr, err := keypackage.NewManager(keypackage.ManagerOptions{Store: store, Transport: tr, Engine: engine, Wrappers: registry(t),
		Clock: clock.System{}, Identity: res, Installation: id, DestroyDelay: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if _, err := mgr.Rotate(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := mgr.DestroySuperseded(ctx); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			os.WriteFile(os.Getenv(envCrashReady), []byte("ready"), 0o600)
		}
	}
}

// A process killed with SIGKILL in the middle of rotations leaves either
// the old package and its keys or the new one published with its keys —
// never a served package whose private keys are gone (JOIN-020, JOIN-003);
// after the restart a tick completes the rotation.
func TestCrashDuringRotation(t *testing.T) {
	if os.Getenv(envCrashAddr) != "" {
		crashChild(t)
		return
	}
	for _, db := range dbs {
		t.Run(db, func(t *testing.T) {
			clk := clock.NewFake(time.Now())
			svc := newService(t, clk)
			addr := serveGRPC(t, svc)
			in := newInstallation(t, db, svc, clk)
			if _, err := in.mgr.Publish(testCtx(t)); err != nil {
				t.Fatal(err)
			}
			in.store.Close()
			for round := 0; round < 3; round++ {
				ready := filepath.Join(t.TempDir(), "ready")
				cmd := exec.Command(os.Args[0], "-test.run=^TestCrashDuringRotation$")
				cmd.Env = append(os.Environ(), envCrashAddr+"="+addr, envCrashDB+"="+db, envCrashLocator+"="+in.locator, envCrashReady+"="+ready)
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				deadline := time.Now().Add(60 * time.Second)
				for {
					if _, err := os.Stat(ready); err == nil {
						break
					}
					if time.Now().After(deadline) {
						cmd.Process.Kill()
						cmd.Wait()
						t.Fatal("the child never rotated")
					}
					time.Sleep(20 * time.Millisecond)
				}
				time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond)
				cmd.Process.Kill()
				cmd.Wait()
				in.reopen()
				check := func(when string) {
					served := in.newest()
					found := false
					for _, r := range in.records() {
						if bytes.Equal(r.KeyPackage, served) {
							found = true
							if !hasKeys(r) {
								t.Fatalf("round %d %s: the served package's private keys are gone", round, when)
							}
						}
					}
					if !found {
						t.Fatalf("round %d %s: the served package is not in the store", round, when)
					}
				}
				check("after SIGKILL")
				clk.Set(time.Now())
				if err := in.mgr.Tick(testCtx(t)); err != nil {
					t.Fatalf("tick after restart: %v", err)
				}
				check("after the restart's tick")
				in.store.Close()
			}
		})
	}
}
