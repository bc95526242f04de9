package join_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/adapters/grpctransport"
	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/core/join"
	"github.com/regroup-mls/regroup/ports"
)

const (
	envCrashAddr    = "REGROUP_JOIN_CRASH_ADDR"
	envCrashDB      = "REGROUP_JOIN_CRASH_DB"
	envCrashLocator = "REGROUP_JOIN_CRASH_LOCATOR"
	envCrashAt      = "REGROUP_JOIN_CRASH_AT"
	envCrashReady   = "REGROUP_JOIN_CRASH_READY"
)

// pausing stops the process at its at-th transaction: step 2k-1 blocks
// inside transaction k after its writes, before the commit; step 2k
// blocks right after transaction k committed. The parent kills it there.
type pausing struct {
	ports.Store
	n     atomic.Int32
	at    int32
	ready string
}

func (p *pausing) stop() {
	os.WriteFile(p.ready, []byte("ready"), 0o600)
	select {}
}

func (p *pausing) Tx(ctx context.Context, fn func(ports.Tx) error) error {
	k := p.n.Add(1)
	err := p.Store.Tx(ctx, func(tx ports.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		if 2*k-1 == p.at {
			p.stop()
		}
		return nil
	})
	if 2*k == p.at {
		p.stop()
	}
	return err
}

// crashChild processes the installation's welcome topic over gRPC and
// stops at the requested step; past the last step it finishes and says so.
func crashChild(t *testing.T) {
	ctx := context.Background()
	store, err := openStore(ctx, os.Getenv(envCrashDB), os.Getenv(envCrashLocator))
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
	at, _ := strconv.Atoi(os.Getenv(envCrashAt))
	p := &pausing{Store: store, at: int32(at), ready: os.Getenv(envCrashReady)}
	eng, _ := mls.New(mls.Options{SignaturePrivateKey: id.InstallationKey.Seed()})
	res, _ := identity.NewResolver(identity.ResolverOptions{Store: p, Transport: tr, Clock: clock.System{}})
	log, _ := commitlog.New(commitlog.Options{Enabled: true, Store: p, Transport: tr, Clock: clock.System{}, Views: eng, InstallationKey: id.InstallationKey})
	rcv, err := join.NewReceiver(join.ReceiverOptions{Store: p, MLS: eng, Transport: tr, Clock: clock.System{}, Algorithms: builtinRegistry(t),
		Installation: id, Identity: res, ProtocolVersion: protocolVersion, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := rcv.Process(ctx); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(p.ready, []byte("done"), 0o600)
	select {}
}

// JOIN-046: a process killed with SIGKILL at every step of a join, before
// and after each of its transactions commits, leaves either no state for
// the group or the whole state with cursor = message_cursor; the restart
// completes the join exactly once. On SQLite and PostgreSQL.
func TestJOIN046_CrashAtEveryStepOfAnInstall(t *testing.T) {
	if os.Getenv(envCrashAddr) != "" {
		crashChild(t)
		return
	}
	for _, db := range dbs {
		t.Run(db, func(t *testing.T) {
			// One delivery service and adder; a fresh joiner each round.
			w := newWorld(t, db)
			rpc := grpctransport.NewServer(w.svc, nil)
			gs := rpc.GRPCServer()
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go gs.Serve(lis)
			defer func() { rpc.Shutdown(); gs.Stop() }()
			a := w.newInst("adder", instOptions{})
			for at := 1; ; at++ {
				if done := crashRound(t, w, a, lis.Addr().String(), at); done {
					if at < 10 {
						t.Fatalf("the join finished after %d steps: the pause never hit the install", at)
					}
					return
				}
			}
		})
	}
}

// crashRound runs one child that stops at step at, kills it, and checks
// the state; done reports a child that finished without stopping.
func crashRound(t *testing.T, w *world, a *inst, addr string, at int) (done bool) {
	j := w.newInst(fmt.Sprintf("joiner %d", at), instOptions{})
	g := a.newGroup(groupSpec{})
	ad, _ := g.join(j, addSpec{})
	j.store.Close()

	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command(os.Args[0], "-test.run=^TestJOIN046_CrashAtEveryStepOfAnInstall$")
	cmd.Env = append(os.Environ(), envCrashAddr+"="+addr, envCrashDB+"="+w.db, envCrashLocator+"="+j.locator,
		envCrashAt+"="+strconv.Itoa(at), envCrashReady+"="+ready)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	var state []byte
	for {
		if b, err := os.ReadFile(ready); err == nil && len(b) > 0 {
			state = b
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("step %d: the child never reached its step", at)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()

	j.reopen()
	gr, hasGroup := j.group(g.id)
	_, hasState := j.view(g.id)
	switch {
	case hasGroup != hasState:
		t.Fatalf("step %d: group record %v but engine state %v", at, hasGroup, hasState)
	case hasGroup && (gr.Cursor != ad.anchor || gr.JoinAnchor != ad.anchor || !gr.Active || gr.Membership != 1):
		t.Fatalf("step %d: partial install %+v, want cursor = anchor %d", at, gr, ad.anchor)
	}
	installed := hasGroup
	j.process()
	j.retry()
	gr, hasGroup = j.group(g.id)
	if !hasGroup || gr.Cursor != ad.anchor || gr.Membership != 1 {
		t.Fatalf("step %d: after the restart the group is %+v (held %v)", at, gr, hasGroup)
	}
	if held, _ := j.rcv.Held(w.ctx); len(held) != 0 {
		t.Fatalf("step %d: %d Welcomes still held after the restart", at, len(held))
	}
	if rej, _ := j.rcv.Rejected(w.ctx); len(rej) != 0 {
		t.Fatalf("step %d: rejected %+v", at, rej)
	}
	t.Logf("step %d: %s; installed before the kill: %v", at, state, installed)
	return string(state) == "done"
}
