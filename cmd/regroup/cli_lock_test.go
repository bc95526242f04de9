package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/regroup-mls/regroup/internal/lockfile"
	"github.com/regroup-mls/regroup/internal/testenv"
)

var (
	cliOnce sync.Once
	cliBin  string
	cliErr  error
)

// cliBinary builds the regroup binary once per test binary.
func cliBinary(t *testing.T) string {
	t.Helper()
	cliOnce.Do(func() {
		dir, err := os.MkdirTemp("", "regroup-bin-")
		if err != nil {
			cliErr = err
			return
		}
		cliBin = filepath.Join(dir, "regroup")
		if out, err := exec.Command("go", "build", "-o", cliBin, ".").CombinedOutput(); err != nil {
			cliErr = err
			cliBin = string(out)
		}
	})
	if cliErr != nil {
		t.Fatalf("go build: %v\n%s", cliErr, cliBin)
	}
	return cliBin
}

// A home is one client: two regroup processes started together on one
// home both finish (the second waits for the first) and leave the member
// unforked; a command that cannot get the home within --timeout exits 5
// naming the holder's process; one that gets it while waiting says it
// waited and runs.
func TestCLIHomeIsOneClient(t *testing.T) {
	if testing.Short() {
		t.Skip("runs regroupd and the regroup binary")
	}
	bin := cliBinary(t)
	d := testenv.StartRegroupd(t, "sqlite")
	dir := t.TempDir()
	alice := user{t, bin, filepath.Join(dir, "alice")}
	bob := user{t, bin, filepath.Join(dir, "bob")}
	var aliceID, bobID whoamiJSON
	alice.json(&aliceID, "init", "--server", d.Addr)
	bob.json(&bobID, "init", "--server", d.Addr)
	var team convJSON
	bob.json(&team, "group", "create", "team", aliceID.InboxID)
	alice.ok("send", team.ID[:8], "hello")

	// Two processes on bob's home at once, each committing.
	var wg sync.WaitGroup
	results := make([]string, 2)
	for i, name := range []string{"one", "two"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, errOut, code := bob.run("group", "rename", team.ID[:8], name)
			results[i] = strconv.Itoa(code) + " " + out + errOut
		}()
	}
	wg.Wait()
	for _, r := range results {
		if !strings.HasPrefix(r, "0 ") {
			t.Fatalf("two commands on one home: %q", results)
		}
	}
	alice.ok("sync")
	bob.ok("group", "rename", team.ID[:8], "three") // a commit after both
	alice.ok("sync")
	for _, u := range []user{alice, bob} {
		var forks []forkJSON
		u.json(&forks, "fork-status", team.ID[:8])
		if len(forks) != 1 || forks[0].State != "not forked" || forks[0].Name != "three" {
			t.Fatalf("%s after two concurrent commands of bob: %+v", filepath.Base(u.home), forks)
		}
	}

	// The test holds bob's home: a command gives up after --timeout.
	l, err := lockfile.Acquire(filepath.Join(bob.home, storeFile) + ".lock")
	if err != nil {
		t.Fatal(err)
	}
	_, errOut, code := bob.run("whoami", "--timeout", "300ms")
	if code != exitBusy || !strings.Contains(errOut, "process "+strconv.Itoa(os.Getpid())) || !strings.Contains(errOut, "one home is one client") {
		t.Fatalf("whoami on a held home: exit %d, %q", code, errOut)
	}
	// ... and one that gets the home while it waits runs.
	cmd := exec.Command(bin, "--home", bob.home, "whoami", "--json")
	var out bytes.Buffer
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil || !strings.Contains(line, "waiting for the other regroup command") {
		t.Fatalf("whoami waiting: %q, %v", line, err)
	}
	_ = l.Release()
	if err := cmd.Wait(); err != nil || !strings.Contains(out.String(), bobID.InboxID) {
		t.Fatalf("whoami after the home was released: %v, %q", err, out.String())
	}
}
