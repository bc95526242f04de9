package keypackage_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/adapters/grpctransport"
	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/core/keypackage"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

const (
	envCrashAddr    = "REGROUP_KP_CRASH_ADDR"
	envCrashDB      = "REGROUP_KP_CRASH_DB"
	envCrashLocator = "REGROUP_KP_CRASH_LOCATOR"
	envCrashAt      = "REGROUP_KP_CRASH_AT"
	envCrashStart   = "REGROUP_KP_CRASH_START"
	envCrashReport  = "REGROUP_KP_CRASH_REPORT"
)

// crashDelay is the destruction delay of the crash test: the default
// (JOIN-074).
const crashDelay = 24 * time.Hour

// killer counts the child's steps and kills the process with SIGKILL at
// step at, after writing which step it was to the report file. A
// transaction k is two steps — inside it after its writes, before the
// commit, and right after it committed — and a publish is two: before the
// request leaves and after its response arrived, before it is recorded.
type killer struct {
	n      atomic.Int32
	at     int32
	report string
}

func (k *killer) step(what string) {
	if k.n.Add(1) != k.at {
		return
	}
	os.WriteFile(k.report, []byte(what), 0o600)
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// killingStore is the child's store: an ordinary store whose transactions
// are kill points.
type killingStore struct {
	ports.Store
	k  *killer
	tx atomic.Int32
}

func (s *killingStore) Tx(ctx context.Context, fn func(ports.Tx) error) error {
	n := s.tx.Add(1)
	err := s.Store.Tx(ctx, func(tx ports.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		s.k.step(fmt.Sprintf("transaction %d, before its commit", n))
		return nil
	})
	s.k.step(fmt.Sprintf("transaction %d, after its commit", n))
	return err
}

// killingTransport is the child's transport: publishes are kill points.
type killingTransport struct {
	ports.Transport
	k *killer
}

func (t killingTransport) Publish(ctx context.Context, envs []*backendpb.ClientEnvelope) ([]uint64, error) {
	t.k.step("before the publish request")
	ids, err := t.Transport.Publish(ctx, envs)
	t.k.step("after the publish response")
	return ids, err
}

// crashChild runs one rotation the way a client does, with kill points:
// a tick at the start time rotates the current package (a Welcome to it
// was accepted), then a tick one delay later destroys the superseded keys.
// Past its last step it writes "done" to the report file.
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
	grpc, err := grpctransport.Dial(os.Getenv(envCrashAddr), &grpctransport.ClientOptions{InstallationKey: id.InstallationKey})
	if err != nil {
		t.Fatal(err)
	}
	at, _ := strconv.Atoi(os.Getenv(envCrashAt))
	start, _ := strconv.ParseInt(os.Getenv(envCrashStart), 10, 64)
	k := &killer{at: int32(at), report: os.Getenv(envCrashReport)}
	st, tr := &killingStore{Store: store, k: k}, killingTransport{Transport: grpc, k: k}
	clk := clock.NewFake(time.Unix(0, start).UTC())
	engine, err := mls.New(mls.Options{SignaturePrivateKey: id.InstallationKey.Seed()})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := identity.NewResolver(identity.ResolverOptions{Store: st, Transport: tr, Clock: clk})
	mgr, err := keypackage.NewManager(keypackage.ManagerOptions{Store: st, Transport: tr, Engine: engine, Wrappers: registry(t),
		Clock: clk, Identity: res, Installation: id, DestroyDelay: crashDelay})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(crashDelay + time.Minute)
	if err := mgr.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(k.report, []byte("done"), 0o600)
}

// JOIN-003, JOIN-020, JOIN-074: a process killed with SIGKILL at every
// step of a rotation — before and after each of its store transactions
// commits, and before and after its publish — leaves either the old
// package served with its keys, or the new one served with its keys and
// the old one's keys kept until one delay after the new one's confirmed
// publish; never a served package whose private keys are gone. The
// restarted manager, after an outage of two days, completes the rotation
// and destroys the old keys no earlier than that. On SQLite and
// PostgreSQL.
func TestCrashDuringRotation(t *testing.T) {
	if os.Getenv(envCrashAddr) != "" {
		crashChild(t)
		return
	}
	for _, db := range dbs {
		t.Run(db, func(t *testing.T) {
			start := t0 // whole seconds: every database keeps them exactly
			svc := &recording{DeliveryService: newService(t, clock.NewFake(start)), published: map[uint64][]byte{}}
			addr := serveGRPC(t, svc)
			seen := map[string]int{}
			for at := 1; ; at++ {
				outcome, class := crashRound(t, db, svc, addr, start, at)
				seen[class]++
				t.Logf("step %d (%s): %s", at, outcome, class)
				if outcome == "done" {
					break
				}
				if at > 200 {
					t.Fatal("the child never finished")
				}
			}
			// The kill points must have reached every window of the rotation.
			for _, c := range []string{classOld, classStored, classServedUnconfirmed, classConfirmed, classDestroyed} {
				if seen[c] == 0 {
					t.Errorf("no kill point left the state %q (seen %v)", c, seen)
				}
			}
		})
	}
}

// The states a kill can leave, from the first to the last.
const (
	classOld               = "old package only"
	classStored            = "replacement stored, old package served"
	classServedUnconfirmed = "replacement served, its publish not yet recorded"
	classConfirmed         = "replacement confirmed, old keys held"
	classDestroyed         = "replacement confirmed, old keys destroyed"
)

// crashRound prepares a fresh installation with a confirmed package and a
// pending rotation, runs a child that kills itself at step at, checks the
// state it left, restarts and checks again. It returns what the child
// reported (the step or "done") and the state the kill left.
func crashRound(t *testing.T, db string, svc *recording, addr string, start time.Time, at int) (outcome, class string) {
	clk := clock.NewFake(start)
	in := newInstallation(t, db, svc, clk)
	ctx := testCtx(t)
	old, err := in.mgr.Publish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.mgr.WelcomeAccepted(ctx, old.Ref); err != nil {
		t.Fatal(err)
	}
	in.store.Close()

	report := filepath.Join(t.TempDir(), "report")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashDuringRotation$", "-test.count=1")
	cmd.Env = append(os.Environ(), envCrashAddr+"="+addr, envCrashDB+"="+db, envCrashLocator+"="+in.locator,
		envCrashAt+"="+strconv.Itoa(at), envCrashStart+"="+strconv.FormatInt(start.UnixNano(), 10), envCrashReport+"="+report)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("step %d: the child did not finish:\n%s", at, out.String())
	}
	b, err := os.ReadFile(report)
	if err != nil || len(b) == 0 {
		t.Fatalf("step %d: the child stopped without a report (%v):\n%s", at, cmd.ProcessState, out.String())
	}
	outcome = string(b)

	in.reopen()
	class = checkRotationState(t, svc, in, old.Ref, fmt.Sprintf("step %d (%s), after SIGKILL", at, outcome))
	// The restart comes after an outage of two days, and one delay later.
	clk.Set(start.Add(48 * time.Hour))
	if err := in.mgr.Tick(ctx); err != nil {
		t.Fatalf("step %d: tick after the restart: %v", at, err)
	}
	checkRotationState(t, svc, in, old.Ref, fmt.Sprintf("step %d (%s), after the restart's tick", at, outcome))
	clk.Advance(crashDelay)
	if err := in.mgr.Tick(ctx); err != nil {
		t.Fatalf("step %d: tick a delay after the restart: %v", at, err)
	}
	if c := checkRotationState(t, svc, in, old.Ref, fmt.Sprintf("step %d (%s), a delay after the restart", at, outcome)); c != classDestroyed {
		t.Fatalf("step %d (%s): a delay after the restart the state is %q, want the rotation finished", at, outcome, c)
	}
	in.store.Close()
	return outcome, class
}

// recording is the delivery service with a log of every key package it
// accepted, by sequence id: the test's own record of the topic, which
// regroupd serves only its newest envelope of.
type recording struct {
	ports.DeliveryService
	mu        sync.Mutex
	published map[uint64][]byte
}

func (r *recording) Publish(ctx context.Context, caller ports.Caller, envs []*backendpb.ClientEnvelope) ([]uint64, error) {
	ids, err := r.DeliveryService.Publish(ctx, caller, envs)
	if err == nil && len(ids) == len(envs) {
		r.mu.Lock()
		for i, e := range envs {
			if kp := e.GetKeyPackage(); kp != nil {
				r.published[ids[i]] = kp.GetKeyPackageTlsSerialized()
			}
		}
		r.mu.Unlock()
	}
	return ids, err
}

func (r *recording) at(seq uint64) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.published[seq]
}

// checkRotationState checks the installation's stored packages against
// what its key-package topic serves, independently of the manager's own
// reading of its state, and returns the state's class:
//   - the served package is stored with all three private keys;
//   - every recorded publish is on the topic at its sequence id;
//   - a package whose keys are gone has all three gone (JOIN-019), and a
//     later package's publish, on the topic, was confirmed at least one
//     delay before the destruction (JOIN-074).
func checkRotationState(t *testing.T, svc *recording, in *installation, oldRef []byte, when string) string {
	t.Helper()
	served := in.newest()
	recs := in.records()
	var servedRec, oldRec *ports.KeyPackageRecord
	for i := range recs {
		r := &recs[i]
		if bytes.Equal(r.KeyPackage, served) {
			servedRec = r
		}
		if bytes.Equal(r.Ref, oldRef) {
			oldRec = r
		}
		if r.PublishSequenceID > 0 && !bytes.Equal(svc.at(r.PublishSequenceID), r.KeyPackage) {
			t.Fatalf("%s: package %x records a publish at %d the topic does not hold", when, r.Ref[:4], r.PublishSequenceID)
		}
	}
	switch {
	case servedRec == nil:
		t.Fatalf("%s: the served package is not in the store", when)
	case !hasKeys(*servedRec):
		t.Fatalf("%s: the served package's private keys are gone", when)
	case oldRec == nil:
		t.Fatalf("%s: the old package is not in the store", when)
	}
	for _, r := range recs {
		if hasKeys(r) {
			continue
		}
		if !noKeys(r) {
			t.Fatalf("%s: package %x lost some of its private keys, not all three", when, r.Ref[:4])
		}
		justified := false
		for _, o := range recs {
			if o.PublishSequenceID > r.PublishSequenceID && !o.PublishConfirmedAt.IsZero() &&
				!r.DestroyedAt.Before(o.PublishConfirmedAt.Add(crashDelay)) {
				justified = true
			}
		}
		if !justified {
			t.Fatalf("%s: package %x was destroyed at %v, not one delay after a later package's confirmed publish", when, r.Ref[:4], r.DestroyedAt)
		}
	}
	isOld := bytes.Equal(servedRec.Ref, oldRef)
	switch {
	case isOld && len(recs) == 1:
		return classOld
	case isOld:
		return classStored
	case servedRec.PublishSequenceID == 0:
		return classServedUnconfirmed
	case hasKeys(*oldRec):
		return classConfirmed
	default:
		return classDestroyed
	}
}
