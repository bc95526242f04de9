package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/internal/testenv"
)

// user runs the regroup binary as one CLI user, with its own home.
type user struct {
	t    *testing.T
	bin  string
	home string
}

// run runs the command and returns its stdout, stderr and exit code.
// Its stdout and stderr are pipes, not terminals.
func (u user) run(args ...string) (stdout, stderr string, code int) {
	u.t.Helper()
	cmd := exec.Command(u.bin, append([]string{"--home", u.home}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		u.t.Fatalf("regroup %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), code
}

// ok runs the command, fails the test unless it exits 0, and returns its
// stdout.
func (u user) ok(args ...string) string {
	u.t.Helper()
	out, errOut, code := u.run(args...)
	if code != exitOK {
		u.t.Fatalf("regroup %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// json runs the command with --json and decodes its stdout into v.
func (u user) json(v any, args ...string) {
	u.t.Helper()
	out := u.ok(append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		u.t.Fatalf("regroup %s --json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (u user) contains(out string, wants ...string) {
	u.t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			u.t.Fatalf("output lacks %q:\n%s", w, out)
		}
	}
}

// buildCLI builds the regroup binary.
func buildCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "regroup")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// Two CLI users chat through a regroupd process, then one is forked on
// purpose and repaired: every step through the binary, checking what it
// prints, as text and as JSON, and its exit codes.
func TestCLIEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries and runs regroupd")
	}
	bin := buildCLI(t)
	d := testenv.StartRegroupd(t, "sqlite")
	dir := t.TempDir()
	alice := user{t, bin, filepath.Join(dir, "alice")}
	bob := user{t, bin, filepath.Join(dir, "bob")}

	// Before init: no identity, exit 3, and the way out.
	_, errOut, code := alice.run("whoami")
	if code != exitNotFound || !strings.Contains(errOut, "regroup init --home") {
		t.Fatalf("whoami before init: exit %d, %q", code, errOut)
	}
	alice.contains(alice.ok("init", "--server", d.Addr), "created in", "key package is published")
	var bobID whoamiJSON
	bob.json(&bobID, "init", "--server", d.Addr)
	if len(bobID.InboxID) != 64 || bobID.Server != d.Addr {
		t.Fatalf("bob's init: %+v", bobID)
	}
	if _, _, code := bob.run("init"); code != exitFailure {
		t.Fatalf("a second init in one home: exit %d", code)
	}

	// alice creates the group with bob; bob finds it by name.
	var team convJSON
	alice.json(&team, "group", "create", "team", bobID.InboxID)
	if team.Type != "group" || team.Name != "team" || team.Epoch != 1 || len(team.ID) != 64 {
		t.Fatalf("group create: %+v", team)
	}
	bob.contains(bob.ok("group", "list"), "team", team.ID[:16], "unknown") // joined, not yet allowed
	bob.contains(bob.ok("send", "team", "hello", "alice"), "sent to team")
	alice.contains(alice.ok("send", team.ID[:6], "--", "-hi bob"), "sent to team")

	var msgs []messageJSON
	alice.json(&msgs, "read", "team")
	if texts := textsOf(msgs); strings.Join(texts, "|") != "hello alice|-hi bob" {
		t.Fatalf("alice reads %q", texts)
	}
	bob.contains(bob.ok("read", "team"), "me                hello alice", "-hi bob")
	alice.contains(alice.ok("read", "team"), "me                * added "+bobID.InboxID[:16]) // her own commit's record
	var info infoJSON
	bob.json(&info, "group", "info", "team")
	if len(info.Members) != 2 || info.Creator == bobID.InboxID || len(info.SuperAdmins) != 1 {
		t.Fatalf("group info: %+v", info)
	}

	// A commit both logs hold: bob reads not forked.
	alice.ok("group", "rename", "team", "crew")
	bob.ok("sync")
	var forks []forkJSON
	bob.json(&forks, "fork-status", "crew")
	if len(forks) != 1 || forks[0].State != "not forked" || forks[0].SharedCommit == 0 || !forks[0].LogRead {
		t.Fatalf("bob's fork status: %+v", forks)
	}
	bob.contains(bob.ok("fork-status"), "crew", "not forked", "allowed")

	// The fork: bob merges alice's next commit under the fault injector.
	alice.ok("group", "rename", "crew", "team")
	out := bob.ok("sync", "--inject-fault", "misrecord-authenticator", "crew")
	bob.contains(out, "misrecord-authenticator fired", "fork state not forked → forked", "request sent")
	bob.json(&forks, "fork-status", "team")
	if forks[0].State != "forked" {
		t.Fatalf("bob after the fault: %+v", forks)
	}
	var lg logJSON
	bob.json(&lg, "log", "team")
	diverging := 0
	for _, r := range lg.Rows {
		if r.Diverges {
			diverging++
			if r.Commit != forks[0].SharedCommit {
				t.Errorf("row %d diverges; the fork is at the shared commit %d", r.Commit, forks[0].SharedCommit)
			}
		}
	}
	if lg.ForkState != "forked" || diverging != 1 {
		t.Fatalf("bob's log: %+v", lg)
	}
	bob.contains(bob.ok("log", "team"), "<< diverges")

	// The repair: alice answers the request, bob rejoins, and a commit
	// after the rejoin reads not forked.
	alice.contains(alice.ok("sync"), "readd published")
	bob.contains(bob.ok("sync"), "rejoined", "forked → unknown")
	alice.ok("group", "rename", "team", "crew")
	bob.contains(bob.ok("sync"), "unknown → not forked")
	bob.contains(bob.ok("log", "crew"), "<< diverged (earlier membership)")
	var wel welcomesJSON
	bob.json(&wel, "welcomes")
	if len(wel.Held) != 0 || len(wel.Rejected) != 0 {
		t.Fatalf("bob's welcomes after the repair: %+v", wel)
	}
	bob.json(&msgs, "read", "crew")
	if texts := textsOf(msgs); strings.Join(texts, "|") != "hello alice|-hi bob" {
		t.Fatalf("bob's messages across the rejoin: %q", texts)
	}

	// A DM, named by the peer's inbox id; then bob is removed.
	var aliceID whoamiJSON
	alice.json(&aliceID, "whoami")
	alice.contains(alice.ok("dm", bobID.InboxID), "opened dm")
	bob.contains(bob.ok("send", aliceID.InboxID, "direct"), "sent to dm")
	alice.json(&msgs, "read", bobID.InboxID)
	if texts := textsOf(msgs); strings.Join(texts, "|") != "direct" {
		t.Fatalf("alice reads the DM %q", texts)
	}
	alice.ok("group", "remove", "crew", bobID.InboxID)
	bob.contains(bob.ok("sync"), "removed this installation", "inactive")
	if _, errOut, code := bob.run("send", "crew", "still here?"); code != exitFailure || !strings.Contains(errOut, "inactive") {
		t.Fatalf("bob sends to a group he was removed from: exit %d, %q", code, errOut)
	}

	// Exit codes: usage, not found, server unreachable.
	for _, tc := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"send", "crew"}, exitUsage, "no message: give TEXT, or pipe it"}, // standard input is empty
		{[]string{"send"}, exitUsage, "usage: regroup send CONVERSATION [TEXT...]"},
		{[]string{"frob"}, exitUsage, "regroup help"},
		{[]string{"read", "nosuch"}, exitNotFound, "regroup group list"},
		{[]string{"group", "create", "typo", "zz"}, exitUsage, "not an inbox id"},
		{[]string{"group", "create", "stranger", strings.Repeat("ab", 32)}, exitNotFound, "unknown to regroupd"},
		{[]string{"read", "crew", "--server", "127.0.0.1:1"}, exitUnavailable, "not reachable"},
	} {
		_, errOut, code := bob.run(tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.says) {
			t.Errorf("regroup %s: exit %d, stderr %q; want exit %d saying %q", strings.Join(tc.args, " "), code, errOut, tc.code, tc.says)
		}
	}
	var list []convJSON
	bob.json(&list, "group", "list")
	if len(list) != 2 {
		t.Errorf("failed commands left conversations behind: %+v", list)
	}
	// Output to pipes: no progress bar on stderr.
	if _, errOut, _ := bob.run("sync"); errOut != "" {
		t.Errorf("sync to a pipe wrote to stderr: %q", errOut)
	}
}

func textsOf(msgs []messageJSON) []string {
	var out []string
	for _, m := range msgs {
		if m.Kind == "text" {
			out = append(out, m.Text)
		}
	}
	return out
}
