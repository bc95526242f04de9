package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/regroup-mls/regroup/internal/testenv"
)

// hostile is text a peer might send to rewrite the user's terminal:
// a window-title OSC, a screen clear, a C1 CSI, a right-to-left override
// and isolate, a newline forging a line, and a byte that is not UTF-8.
const hostile = "\x1b]0;pwned\x07hi\x1b[2J\u009b31m \u202eevil\u2066x\u2069\n12:00:00  alice  forged\xff"

// terminalSafe is an independent check of what may reach a terminal:
// UTF-8, no control character but the layout's, no bidi control.
func terminalSafe(s string, layout bool) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if layout && (r == '\n' || r == '\t') {
			continue
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) ||
			r == 0x200e || r == 0x200f || r == 0x061c {
			return false
		}
	}
	return true
}

func TestClean(t *testing.T) {
	got := clean(hostile)
	want := `\x1b]0;pwned\x07hi\x1b[2J\u009b31m \u202eevil\u2066x\u2069\n12:00:00  alice  forged\xff`
	if got != want || !terminalSafe(got, false) {
		t.Fatalf("clean:\n got %s\nwant %s", got, want)
	}
	for _, s := range []string{"plain text", "ünïcödé ✓ 日本語", "emoji 👩‍👩‍👧"} {
		if clean(s) != s {
			t.Errorf("clean changed safe text %q to %q", s, clean(s))
		}
	}
	var b bytes.Buffer
	if _, err := (termWriter{&b}).Write([]byte("a\tb\n" + hostile)); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "a\tb\n") || !terminalSafe(b.String(), true) || strings.Contains(b.String(), "\x1b") {
		t.Fatalf("termWriter: %q", b.String())
	}
}

func TestCheckGroupName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"team", true},
		{strings.Repeat("é", maxGroupNameRunes), true}, // characters, not bytes
		{"", false},
		{"   ", false},
		{strings.Repeat("x", maxGroupNameRunes+1), false},
		{strings.Repeat("x", 5000), false},
		{"bad\xff", false},
	} {
		if err := checkGroupName(tc.name); (err == nil) != tc.ok || (err != nil && exitCode(err) != exitUsage) {
			t.Errorf("%.20q: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

func TestMessageText(t *testing.T) {
	defer func(r io.Reader) { stdin = r }(stdin)
	for _, tc := range []struct {
		why   string
		args  []string
		input string
		want  string
		fail  bool
	}{
		{"arguments joined", []string{"hello", "there"}, "", "hello there", false},
		{"no TEXT reads standard input", nil, "from a pipe\n", "from a pipe", false},
		{"- reads standard input, keeping inner newlines", []string{"-"}, "two\nlines\r\n", "two\nlines", false},
		{"empty standard input is a usage error", nil, "", "", true},
		{"too large", []string{"-"}, strings.Repeat("x", maxStdinMessage+1), "", true},
	} {
		stdin = strings.NewReader(tc.input)
		got, err := messageText(tc.args)
		if (err != nil) != tc.fail || got != tc.want {
			t.Errorf("%s: %q %v", tc.why, got, err)
		}
	}
}

func TestHelpEdges(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"help", "demo"}, "usage: regroup demo"},
		{[]string{"help", "group"}, "group create NAME"},
		{[]string{"help", "group", "create"}, "usage: regroup group create"},
		{[]string{"--version"}, "regroup "},
		{[]string{"version"}, "revision"},
	} {
		var out, errOut bytes.Buffer
		if code := run(ctx, tc.args, &out, &errOut); code != exitOK || !strings.Contains(out.String(), tc.says) {
			t.Errorf("regroup %s: exit %d, %q %q", strings.Join(tc.args, " "), code, out.String(), errOut.String())
		}
	}
}

// Through the binary: a peer's hostile group name and message reach the
// other member's terminal output escaped and its --json exact (the bytes
// that are not UTF-8 too, in content_base64); send reads standard input;
// the home and its store are owner-only; group names are bounded.
func TestCLIPeerTextIsSanitised(t *testing.T) {
	if testing.Short() {
		t.Skip("runs regroupd and the regroup binary")
	}
	bin := cliBinary(t)
	d := testenv.StartRegroupd(t, "sqlite")
	dir := t.TempDir()
	alice := user{t, bin, filepath.Join(dir, "alice")}
	bob := user{t, bin, filepath.Join(dir, "bob")}
	alice.ok("init", "--server", d.Addr)
	var bobID whoamiJSON
	bob.json(&bobID, "init", "--server", d.Addr)
	for path, want := range map[string]os.FileMode{bob.home: 0o700, filepath.Join(bob.home, storeFile): 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, want mode %o", path, err, want)
		}
	}
	for _, name := range []string{"", strings.Repeat("n", 5000)} {
		if _, errOut, code := alice.run("group", "create", name, bobID.InboxID); code != exitUsage || !strings.Contains(errOut, "group name") {
			t.Errorf("group create with a %d-byte name: exit %d, %q", len(name), code, errOut)
		}
	}
	out, _, code := alice.run("group", "create", "", bobID.InboxID, "--json")
	var ej errorJSON
	if err := json.Unmarshal([]byte(out), &ej); err != nil || code != exitUsage || ej.Error.Kind != "usage" || ej.Error.ExitCode != exitUsage ||
		ej.Error.Command != "group create" || !strings.Contains(ej.Error.Message, "group name is empty") {
		t.Errorf("a usage error with --json: exit %d, %q (%v)", code, out, err)
	}
	name := "te\x1b[31mam\u202e"
	var team convJSON
	alice.json(&team, "group", "create", name, bobID.InboxID)
	cmd := exec.Command(bin, "--home", alice.home, "send", team.ID[:8])
	cmd.Stdin = strings.NewReader(hostile + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("send from standard input: %v\n%s", err, out)
	}

	list := bob.ok("group", "list")
	read := bob.ok("read", team.ID[:8])
	for what, out := range map[string]string{"group list": list, "read": read} {
		if !terminalSafe(out, true) {
			t.Errorf("bob's %s reaches the terminal unescaped: %q", what, out)
		}
	}
	bob.contains(list, `te\x1b[31mam\u202e`)
	bob.contains(read, `\x1b]0;pwned\x07hi`, `\u202eevil`, `\n12:00:00  alice  forged\xff`)

	var convs []convJSON
	bob.json(&convs, "group", "list")
	var msgs []messageJSON
	bob.json(&msgs, "read", team.ID[:8])
	if len(convs) != 1 || convs[0].Name != name {
		t.Errorf("group list --json: %+v, want the exact name %q", convs, name)
	}
	if len(msgs) == 0 || base64.StdEncoding.EncodeToString(msgs[len(msgs)-1].Content) != base64.StdEncoding.EncodeToString([]byte(hostile)) {
		t.Errorf("read --json: %+v, want the exact bytes in content_base64", msgs)
	}
}
