package mls_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/mls"
	"github.com/regroup-mls/regroup/ports"
)

// The child process of TestSIGKILLDuringCommitsLosesNothing reads these.
const (
	envCrashMode    = "REGROUP_MLS_CRASH_MODE" // "loop" or "hold"
	envCrashKind    = "REGROUP_MLS_CRASH_KIND" // "sqlite" or "postgres"
	envCrashLocator = "REGROUP_MLS_CRASH_LOCATOR"
	envCrashWork    = "REGROUP_MLS_CRASH_WORK"
	envCrashReady   = "REGROUP_MLS_CRASH_READY"
)

// The caller's records the child writes in each transaction, beside the
// engine's state.
const (
	nsCrash     = "crash"
	keyProgress = "progress" // how many commits were merged
)

func ctKey(i int) string { return fmt.Sprintf("ct-%03d", i) }

// crashWork is what the child is given: b's signature key, the group and
// the commits to merge in order.
type crashWork struct {
	sig, group []byte
	commits    [][]byte
}

func (w crashWork) write(path string) error {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "sig %x\ngroup %x\n", w.sig, w.group)
	for _, c := range w.commits {
		fmt.Fprintf(&buf, "commit %x\n", c)
	}
	return os.WriteFile(path, buf.Bytes(), 0o600)
}

func readCrashWork(path string) (crashWork, error) {
	var w crashWork
	f, err := os.Open(path)
	if err != nil {
		return w, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		b, err := hex.DecodeString(v)
		if err != nil {
			return w, err
		}
		switch k {
		case "sig":
			w.sig = b
		case "group":
			w.group = b
		case "commit":
			w.commits = append(w.commits, b)
		}
	}
	return w, sc.Err()
}

// crashStep merges commit i in one transaction with the caller's records:
// a message encrypted in the new epoch and the progress. hold, when set,
// is called inside the transaction after every write.
func crashStep(ctx context.Context, e *mls.Engine, s ports.Store, w crashWork, i int, hold func()) error {
	return s.Tx(ctx, func(tx ports.Tx) error {
		if _, err := e.Process(ctx, tx, w.group, w.commits[i]); err != nil {
			return fmt.Errorf("process commit %d: %w", i, err)
		}
		if _, err := e.MergeStaged(ctx, tx, w.group); err != nil {
			return fmt.Errorf("merge commit %d: %w", i, err)
		}
		ct, err := e.Encrypt(ctx, tx, w.group, []byte(ctKey(i)), nil)
		if err != nil {
			return err
		}
		if err := tx.Blobs().Put(ctx, nsCrash, ctKey(i), ct); err != nil {
			return err
		}
		if err := tx.Blobs().Put(ctx, nsCrash, keyProgress, []byte(strconv.Itoa(i+1))); err != nil {
			return err
		}
		if hold != nil {
			hold()
		}
		return nil
	})
}

// crashChild is the child's part: it merges the commits until killed, or
// holds the fourth transaction open for the kill in mode "hold".
func crashChild(t *testing.T) {
	fail := func(err error) {
		fmt.Fprintf(os.Stderr, "mls crash child: %v\n", err)
		os.Exit(3)
	}
	ctx := context.Background()
	w, err := readCrashWork(os.Getenv(envCrashWork))
	if err != nil {
		fail(err)
	}
	var store ports.Store
	if os.Getenv(envCrashKind) == "postgres" {
		store = openPostgres(t, os.Getenv(envCrashLocator))
	} else {
		store = openSQLite(t, os.Getenv(envCrashLocator))
	}
	e, err := mls.New(mls.Options{SignaturePrivateKey: w.sig, PastEpochs: 2})
	if err != nil {
		fail(err)
	}
	ready := func() {
		path := os.Getenv(envCrashReady)
		err := os.WriteFile(path+".tmp", []byte("ready"), 0o600)
		if err == nil {
			err = os.Rename(path+".tmp", path)
		}
		if err != nil {
			fail(err)
		}
	}
	for i := range w.commits {
		var hold func()
		if os.Getenv(envCrashMode) == "hold" && i == 3 {
			hold = func() {
				ready()
				select {} // inside the open transaction, until SIGKILL
			}
		}
		if err := crashStep(ctx, e, store, w, i, hold); err != nil {
			fail(err)
		}
		if i == 2 && hold == nil {
			ready()
		}
	}
	select {} // everything merged: wait for the kill
}

// A process killed with SIGKILL while it merges commits, each in one
// transaction with the caller's records, loses nothing and keeps nothing
// half-written (JOIN-046): after the kill the stored group is exactly at
// the epoch of the last committed transaction, with that epoch's
// authenticator, its tree and secrets load (also in the engine of this
// process, which kept the state from before the child ran), the message
// the last transaction encrypted is readable and the next one uses a
// fresh key, and the group goes on with the remaining commits. Mode
// "loop" kills at a random point of back-to-back transactions, mode
// "hold" inside an open transaction that has written everything.
func TestSIGKILLDuringCommitsLosesNothing(t *testing.T) {
	if os.Getenv(envCrashMode) != "" {
		crashChild(t)
		return
	}
	for _, k := range storeKinds(t) {
		for _, mode := range []string{"loop", "hold"} {
			t.Run(k.name+"/"+mode, func(t *testing.T) { testCrash(t, k, mode) })
		}
	}
}

func testCrash(t *testing.T, k storeKind, mode string) {
	ctx := context.Background()
	gid := []byte("crash-" + mode)
	name := "crash_" + mode
	b := newStoredMember(t, k.open(t, name), "inbox-b")
	a := scaledGroup(t, gid, 40, b)
	// r reads b's messages: it joins with b, then follows the commits.
	r := newInstallationTB(t, "inbox-r")
	rkp := r.keyPackageTB(t)
	out, err := a.engine.Commit(ctx, a.tx, gid, ports.CommitOptions{Add: [][]byte{rkp.KeyPackage}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.engine.MergePending(ctx, a.tx, gid); err != nil {
		t.Fatal(err)
	}
	st, err := r.engine.StageWelcome(ctx, r.tx, out.Welcome, record(rkp))
	if err == nil {
		_, err = r.engine.InstallWelcome(ctx, r.tx, st.Handle)
	}
	if err != nil {
		t.Fatal(err)
	}
	b.apply(gid, out.Commit)
	start := b.view(gid).Epoch // b's engine keeps this state
	w := crashWork{sig: b.sig, group: gid}
	auth := map[uint64][]byte{start: a.view(t, gid).EpochAuthenticator}
	for range 30 {
		c := a.commitAndMerge(t, gid)
		w.commits = append(w.commits, c.Commit)
		auth[c.Staged.Epoch] = c.Staged.EpochAuthenticator
	}
	dir := t.TempDir()
	work, ready := filepath.Join(dir, "work"), filepath.Join(dir, "ready")
	if err := w.write(work); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSIGKILLDuringCommitsLosesNothing$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), envCrashMode+"="+mode, envCrashKind+"="+k.name, envCrashLocator+"="+k.locator(name),
		envCrashWork+"="+work, envCrashReady+"="+ready)
	var childOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &childOut, &childOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(2 * time.Minute)
	for waiting := true; waiting; {
		select {
		case err := <-exited:
			t.Fatalf("the child ended before it was ready (%v):\n%s", err, childOut.String())
		case <-deadline:
			_ = cmd.Process.Kill()
			<-exited
			t.Fatalf("the child never got ready:\n%s", childOut.String())
		case <-time.After(5 * time.Millisecond):
			_, err := os.Stat(ready)
			waiting = err != nil
		}
	}
	if mode == "loop" {
		time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	if err := <-exited; err == nil || strings.Contains(childOut.String(), "mls crash child:") {
		t.Fatalf("the child did not die by the kill (%v):\n%s", err, childOut.String())
	}

	// This process's engine still keeps the state of epoch start; the
	// store shows what the child committed.
	var done int
	var view ports.GroupView
	var last []byte
	b.do(func(ctx context.Context, tx ports.Tx) error {
		p, err := tx.Blobs().Get(ctx, nsCrash, keyProgress)
		if err == nil {
			done, err = strconv.Atoi(string(p))
		} else if errors.Is(err, ports.ErrNotFound) {
			err = nil
		}
		if err != nil {
			return err
		}
		if done > 0 {
			if last, err = tx.Blobs().Get(ctx, nsCrash, ctKey(done-1)); err != nil {
				return err
			}
		}
		view, err = b.engine.Group(ctx, tx, gid)
		return err
	})
	t.Logf("%s/%s: %d of %d commits merged before the kill", k.name, mode, done, len(w.commits))
	if mode == "hold" && done != 3 {
		t.Fatalf("the open transaction's progress %d survived the kill, or an earlier one was lost", done)
	}
	if view.Epoch != start+uint64(done) || !bytes.Equal(view.EpochAuthenticator, auth[view.Epoch]) {
		t.Fatalf("after %d commits the stored group is at epoch %d, want %d with the committer's authenticator", done, view.Epoch, start+uint64(done))
	}
	fresh := b.another(k.open(t, name))
	sameView(t, "a fresh engine after the kill", fresh.view(gid), view)
	for i := range done {
		_, err := r.engine.Process(ctx, r.tx, gid, w.commits[i])
		if err == nil {
			_, err = r.engine.MergeStaged(ctx, r.tx, gid)
		}
		if err != nil {
			t.Fatalf("r: commit %d: %v", i, err)
		}
	}
	if done > 0 {
		r.read(t, gid, last, ctKey(done-1))
	}
	r.read(t, gid, fresh.encrypt(gid, "after the kill"), "after the kill")
	for i := done; i < len(w.commits); i++ {
		b.apply(gid, w.commits[i])
	}
	sameView(t, "after the remaining commits", b.view(gid), a.view(t, gid))
	a.read(t, gid, b.encrypt(gid, "at the end"), "at the end")
}
