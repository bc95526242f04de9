package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

var crashCases = []testCase{
	{"PROC-008/SIGKILLDuringOpenTxLeavesNothing", func(t *testing.T, h Harness) { testCrash(t, h, modeHold) }},
	{"PROC-008/SIGKILLAmidCommitsLeavesWholeTxs", func(t *testing.T, h Harness) { testCrash(t, h, modeLoop) }},
}

const (
	// modeHold: the child commits one transaction, then blocks inside a
	// second one after writing its rows.
	modeHold = "hold"
	// modeLoop: the child commits transactions back to back until killed.
	modeLoop = "loop"
	// crashRows is how many blobs each child transaction writes.
	crashRows = 40
)

var crashGroup = gid(424242)

func crashKey(tx, row int) string { return fmt.Sprintf("tx-%06d/row-%03d", tx, row) }

// crashWrite writes transaction n's rows: crashRows blobs, a local entry
// and a cursor advance, as processing one commit does.
func crashWrite(ctx context.Context, tx ports.Tx, n int) error {
	payload := bytes.Repeat([]byte{byte(n)}, 512)
	for r := 0; r < crashRows; r++ {
		if err := tx.Blobs().Put(ctx, "crash", crashKey(n, r), payload); err != nil {
			return err
		}
	}
	if _, _, err := tx.LocalCommitLog().Append(ctx, ports.LocalCommitLogEntry{GroupID: crashGroup, Membership: 1, CommitSequenceID: uint64(n + 1)}); err != nil {
		return err
	}
	return tx.Groups().Update(ctx, crashGroup, func(g *ports.Group) error { g.Cursor = uint64(n + 1); return nil })
}

// signalReady writes content to path atomically.
func signalReady(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// crashChild is the child process's part: it never returns normally.
func crashChild(t *testing.T, h Harness, locator string) {
	fatal := func(err error) {
		fmt.Fprintf(os.Stderr, "storetest crash child: %v\n", err)
		os.Exit(3)
	}
	ctx := context.Background()
	ready := os.Getenv(envReady)
	s, err := h.OpenLocator(ctx, locator)
	if err != nil {
		fatal(err)
	}
	switch os.Getenv(envMode) {
	case modeHold:
		if err := s.Tx(ctx, func(tx ports.Tx) error { return crashWrite(ctx, tx, 0) }); err != nil {
			fatal(err)
		}
		err = s.Tx(ctx, func(tx ports.Tx) error {
			if err := crashWrite(ctx, tx, 1); err != nil {
				return err
			}
			if err := signalReady(ready, "1"); err != nil {
				return err
			}
			select {} // wait inside the open transaction for SIGKILL
		})
		fatal(fmt.Errorf("held transaction ended: %v", err))
	case modeLoop:
		for n := 0; ; n++ {
			if err := s.Tx(ctx, func(tx ports.Tx) error { return crashWrite(ctx, tx, n) }); err != nil {
				fatal(err)
			}
			if n == 2 {
				if err := signalReady(ready, strconv.Itoa(n+1)); err != nil {
					fatal(err)
				}
			}
		}
	}
	fatal(fmt.Errorf("unknown mode %q", os.Getenv(envMode)))
}

func testCrash(t *testing.T, h Harness, mode string) {
	if !h.Caps().Crash {
		t.Skip("harness does not declare Caps.Crash: the store cannot be opened from a child process")
	}
	s := open(t, h)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		return tx.Groups().Insert(ctx, ports.Group{ID: crashGroup})
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(topTest(t))+"$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), envLocator+"="+h.Locator(), envMode+"="+mode, envReady+"="+ready)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	committed := waitReady(t, ready, exited, &out)
	if mode == modeLoop {
		time.Sleep(time.Duration(rand.Int64N(int64(80 * time.Millisecond))))
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL on Unix
		t.Fatalf("kill child: %v", err)
	}
	<-exited
	s = open(t, h)
	complete := checkWholeTxs(t, s)
	switch mode {
	case modeHold:
		if complete != 1 {
			t.Errorf("after SIGKILL %d transactions are complete, want 1: the open one must leave nothing", complete)
		}
	case modeLoop:
		if complete < committed {
			t.Errorf("after SIGKILL %d transactions are complete, but the child had committed %d", complete, committed)
		}
		t.Logf("child committed %d transactions before SIGKILL", complete)
	}
}

// waitReady waits for the child's ready file and returns the number of
// transactions it reports committed.
func waitReady(t *testing.T, path string, exited chan error, out *bytes.Buffer) int {
	deadline := time.Now().Add(45 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			t.Fatalf("child exited before it was ready (%v):\n%s", err, out.String())
		default:
		}
		if b, err := os.ReadFile(path); err == nil {
			n, err := strconv.Atoi(string(b))
			if err != nil {
				t.Fatalf("bad ready file %q", b)
			}
			return n
		} else if !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("child not ready after 45s:\n%s", out.String())
	return 0
}

// checkWholeTxs checks that every child transaction left all its rows or
// none, that the complete ones are 0..m-1, and that the local log and the
// cursor agree with them; it returns m.
func checkWholeTxs(t *testing.T, s ports.Store) int {
	complete := 0
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		keys, err := tx.Blobs().Keys(ctx, "crash", "")
		if err != nil {
			return err
		}
		perTx := map[int]int{}
		for _, k := range keys {
			var n, r int
			if _, err := fmt.Sscanf(k, "tx-%06d/row-%03d", &n, &r); err != nil {
				return fmt.Errorf("unexpected key %q", k)
			}
			perTx[n]++
		}
		for len(perTx) > 0 && perTx[complete] == crashRows {
			delete(perTx, complete)
			complete++
		}
		for n, c := range perTx {
			t.Errorf("transaction %d left %d of its %d rows", n, c, crashRows)
		}
		entries, err := tx.LocalCommitLog().List(ctx, crashGroup, 0, 0)
		if err != nil {
			return err
		}
		if len(entries) != complete {
			t.Errorf("%d local entries for %d complete transactions", len(entries), complete)
		}
		g, err := tx.Groups().Get(ctx, crashGroup)
		if err != nil {
			return err
		}
		if g.Cursor != uint64(complete) {
			t.Errorf("cursor %d for %d complete transactions", g.Cursor, complete)
		}
		return nil
	})
	return complete
}
