package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/internal/testenv"
)

// Every failure of every command, run through the binary, says why once:
// no line's ending (where a wrapped error's cause stands) is printed twice
// across standard output and standard error, and with --json standard
// output is one JSON document. The command lines cover each command's bad
// flags and arguments, what it names that does not exist, a regroupd that
// stopped, and the demo's bad lines and failed steps.
func TestCLIErrorsPrintedOnce(t *testing.T) {
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
	var group struct {
		ID string `json:"id"`
	}
	alice.json(&group, "group", "create", "team", bobID.InboxID)
	nobody := filepath.Join(dir, "nobody")

	failing := func() [][]string {
		return [][]string{
			{"--home", nobody, "whoami"},
			{"--home", nobody, "init", "--server", "127.0.0.1:1", "--timeout", "5s"},
			{"--home", alice.home, "init", "--server", d.Addr},
			{"--home", alice.home, "group", "create", ""},
			{"--home", alice.home, "group", "create", "team", "deadbeef"},
			{"--home", alice.home, "group", "add", "nosuch", bobID.InboxID},
			{"--home", alice.home, "group", "remove", "nosuch", bobID.InboxID},
			{"--home", alice.home, "group", "rename", "nosuch", "x"},
			{"--home", alice.home, "group", "info", "nosuch"},
			{"--home", alice.home, "dm", "deadbeef"},
			{"--home", alice.home, "send", "nosuch", "hi"},
			{"--home", alice.home, "read", "nosuch"},
			{"--home", alice.home, "read", "--bogus", group.ID},
			{"--home", alice.home, "read"},
			{"--home", alice.home, "read", "--limit", "-1", group.ID},
			{"--home", alice.home, "sync", "nosuch"},
			{"--home", alice.home, "sync", "--inject-fault", "bogus", group.ID},
			{"--home", alice.home, "fork-status", "nosuch"},
			{"--home", alice.home, "log", "nosuch"},
			{"--home", alice.home, "welcomes", "extra"},
			{"--home", alice.home, "approve", "bogus"},
			{"--home", alice.home, "revoke", "bogus"},
			{"--home", alice.home, "export-recovery-key"},
			{"--home", alice.home, "--recover", "bogus", "whoami"},
			{"--home", alice.home, "move", "--server", "127.0.0.1:1"},
			{"--home", alice.home, "--timeout", "0s", "whoami"},
			{"bogus"},
			{"group"},
			{"group", "bogus"},
		}
	}
	check := func(args []string, json bool) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Errorf("regroup %s: want a failure, got %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, &out, &errOut)
			return
		}
		if msg := printedTwice(out.String(), errOut.String(), json); msg != "" {
			t.Errorf("regroup %s (exit %d): %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), exit.ExitCode(), msg, &out, &errOut)
		}
	}
	run := func() {
		for _, args := range failing() {
			check(args, false)
			if args[0] == "--home" || args[0] == "bogus" || args[0] == "group" {
				check(append(append([]string{}, args...), "--json"), true)
			}
		}
	}
	run()
	d.Kill() // every command that needs regroupd, with regroupd gone
	for _, args := range [][]string{
		{"sync"}, {"sync", group.ID}, {"send", group.ID, "hi"}, {"read", group.ID}, {"group", "list"},
		{"group", "add", group.ID, aliceID.InboxID}, {"group", "rename", group.ID, "x"},
		{"dm", bobID.InboxID}, {"installations"},
	} {
		args = append([]string{"--home", alice.home, "--timeout", "5s"}, args...)
		check(args, false)
		check(append(args, "--json"), true)
	}
	for _, args := range [][]string{
		{"demo", "--bogus"},
		{"demo", "--members", "1"},
		{"demo", "--server", "127.0.0.1:1", "--timeout", "10s"},
		{"demo", "--server", "127.0.0.1:1", "--timeout", "10s", "--quiet"},
		{"demo", "--postgres", "postgres://nobody@127.0.0.1:1/none", "--timeout", "10s"},
	} {
		check(args, false)
	}
	check([]string{"demo", "--server", "127.0.0.1:1", "--timeout", "10s", "--json"}, true)
}

// printedTwice returns what a failed command printed twice, or "": the
// last 24 characters of a line of standard error (the cause, in a
// wrapped error) standing anywhere else in the output, or, with --json,
// standard output that is not exactly one JSON document.
func printedTwice(stdout, stderr string, isJSON bool) string {
	all := stderr + "\n" + stdout
	if isJSON {
		dec := json.NewDecoder(strings.NewReader(stdout))
		var v any
		if err := dec.Decode(&v); err != nil {
			return "standard output is not a JSON document: " + err.Error()
		}
		if err := dec.Decode(&v); !errors.Is(err, io.EOF) {
			return "standard output holds more than one JSON document"
		}
		all = stderr
	}
	for _, line := range strings.Split(stderr, "\n") {
		line = strings.TrimSpace(line)
		if len(line) < 24 {
			continue
		}
		tail := line[len(line)-24:]
		if n := strings.Count(all, tail); n > 1 {
			return "printed " + string(rune('0'+min(n, 9))) + " times: ..." + tail
		}
	}
	return ""
}
