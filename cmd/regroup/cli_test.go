package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/ports"
)

func TestParseLine(t *testing.T) {
	send, _, err := findCommand([]string{"send"})
	if err != nil {
		t.Fatal(err)
	}
	read, _, _ := findCommand([]string{"read"})
	for _, tc := range []struct {
		why     string
		cmd     command
		args    []string
		wantPos []string
		want    opts
		wantErr bool
	}{
		{"flags before the arguments", send, []string{"--home", "h", "team", "hi"}, []string{"team", "hi"}, opts{home: "h"}, false},
		{"flags after and between the arguments", send, []string{"team", "--json", "hi", "--server=s:1"}, []string{"team", "hi"},
			opts{json: true, server: "s:1"}, false},
		{"-- makes a text that starts with a dash positional", send, []string{"team", "--", "--not-a-flag"}, []string{"team", "--not-a-flag"}, opts{}, false},
		{"a command's own flag", read, []string{"team", "--limit", "3"}, []string{"team"}, opts{limit: 3}, false},
		{"an unknown flag is a usage error", send, []string{"team", "--frob", "hi"}, nil, opts{}, true},
		{"another command's flag is unknown here", send, []string{"team", "--limit", "3", "hi"}, nil, opts{}, true},
		{"too few arguments", send, []string{"--json"}, nil, opts{}, true},
		{"send's TEXT is optional (standard input)", send, []string{"team"}, []string{"team"}, opts{}, false},
		{"too many arguments", read, []string{"team", "extra"}, nil, opts{}, true},
	} {
		var o opts
		o.timeout = 1
		pos, err := parseLine(tc.cmd, tc.args, &o)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: error %v, want error %v", tc.why, err, tc.wantErr)
			continue
		}
		if tc.wantErr {
			continue
		}
		tc.want.timeout = 1
		if !slices.Equal(pos, tc.wantPos) || o != tc.want {
			t.Errorf("%s: positional %q opts %+v, want %q %+v", tc.why, pos, o, tc.wantPos, tc.want)
		}
	}
}

func TestFindCommand(t *testing.T) {
	for _, tc := range []struct {
		why      string
		args     []string
		wantName string
		wantRest []string
	}{
		{"a one-word command", []string{"read", "team"}, "read", []string{"team"}},
		{"group takes a subcommand", []string{"group", "add", "team", "x"}, "group add", []string{"team", "x"}},
		{"global flags before the command move after it", []string{"--home", "h", "--json", "whoami"}, "whoami", []string{"--home", "h", "--json"}},
		{"-h is help", []string{"-h"}, "help", nil},
		{"a flag's value may start with a dash", []string{"--timeout", "-1s", "--tls", "whoami"}, "whoami", []string{"--timeout", "-1s", "--tls"}},
	} {
		c, rest, err := findCommand(tc.args)
		if err != nil || c.name != tc.wantName || !slices.Equal(rest, tc.wantRest) {
			t.Errorf("%s: %q %q %v, want %q %q", tc.why, c.name, rest, err, tc.wantName, tc.wantRest)
		}
	}
	for _, args := range [][]string{{"frob"}, {"group"}, {"group", "frob"}, {"--home", "h"},
		{"--log-level", "trace", "whoami"}} { // an unknown flag before the command, not the command "trace"
		if _, _, err := findCommand(args); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

// Every command's usage line parses to the arity its run expects.
func TestCheckArity(t *testing.T) {
	for _, tc := range []struct {
		args     string
		min, max int // max -1: unbounded
	}{
		{"", 0, 0}, {"INBOX", 1, 1}, {"[CONVERSATION]", 0, 1}, {"NAME [INBOX...]", 1, -1},
		{"CONVERSATION INBOX...", 2, -1}, {"CONVERSATION NAME", 2, 2},
	} {
		c := command{name: "x", args: tc.args}
		for n := 0; n <= 4; n++ {
			ok := n >= tc.min && (tc.max < 0 || n <= tc.max)
			if err := checkArity(c, make([]string, n)); (err == nil) != ok {
				t.Errorf("%q with %d arguments: error %v, want ok %v", tc.args, n, err, ok)
			}
		}
	}
}

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, exitOK},
		{usagef("bad"), exitUsage},
		{fmt.Errorf("x: %w", errNoIdentity), exitNotFound},
		{fmt.Errorf("x: %w", errNotFound), exitNotFound},
		{fmt.Errorf("inbox: %w", ports.ErrNotFound), exitNotFound},
		{fmt.Errorf("query: %w", ports.ErrUnavailable), exitUnavailable},
		{context.DeadlineExceeded, exitUnavailable},
		{errors.New("anything else"), exitFailure},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("%v: exit %d, want %d", tc.err, got, tc.want)
		}
	}
}

// The conversation a name picks: the whole id, then a group name, then a
// DM peer, then a unique id prefix.
func TestPick(t *testing.T) {
	mk := func(id byte, typ ports.ConversationType, name string, dm ...string) conv {
		b := make([]byte, 32)
		b[0], b[31] = id, id
		return conv{info: client.Info{ID: b, ConversationType: typ, Name: name, DMMembers: dm}}
	}
	team := mk(0xab, ports.ConversationGroup, "team")
	other := mk(0xac, ports.ConversationGroup, "ab") // its name is a prefix of team's id
	dm := mk(0x12, ports.ConversationDM, "", "me", "peer")
	twin := mk(0x13, ports.ConversationGroup, "twin")
	twin2 := mk(0x14, ports.ConversationGroup, "twin")
	all := []conv{team, other, dm, twin, twin2}
	for _, tc := range []struct {
		why  string
		ref  string
		want *conv
		err  error
	}{
		{"a group name", "team", &team, nil},
		{"a name wins over an id prefix", "ab", &other, nil},
		{"a unique id prefix, any case", "AC00", &other, nil},
		{"the whole id", fmt.Sprintf("%x", team.info.ID), &team, nil},
		{"a DM peer's inbox", "peer", &dm, nil},
		{"one's own inbox names no DM", "me", nil, errNotFound},
		{"a shared prefix is ambiguous", "1", nil, errUsage},
		{"a shared name is ambiguous", "twin", nil, errUsage},
		{"nothing matches", "zz", nil, errNotFound},
	} {
		got, err := pick(all, tc.ref, "me")
		switch {
		case tc.err != nil && !errors.Is(err, tc.err):
			t.Errorf("%s: error %v, want %v", tc.why, err, tc.err)
		case tc.err == nil && (err != nil || string(got.info.ID) != string(tc.want.info.ID)):
			t.Errorf("%s: got %x (%v)", tc.why, got.info.ID, err)
		}
	}
}

// The log's rows pair, per commit, the newest local entry with the first
// accepted remote entry; a row diverges exactly when both hold an epoch
// authenticator and they differ, a removal entry excepted.
func TestLogRows(t *testing.T) {
	a, b, c := []byte{1}, []byte{2}, []byte{3}
	local := []ports.LocalCommitLogEntry{
		{CommitSequenceID: 5, AppliedEpochAuthenticator: a, Membership: 1, CommitResult: ports.CommitResultApplied},
		{CommitSequenceID: 9, AppliedEpochAuthenticator: b, Membership: 1, CommitResult: ports.CommitResultApplied},
		{CommitSequenceID: 12, AppliedEpochAuthenticator: b, Membership: 1, RemovedThisInstallation: true},
		{CommitSequenceID: 20, AppliedEpochAuthenticator: a, Membership: 2},
	}
	remote := []ports.RemoteCommitLogEntry{
		{EnvelopeSequenceID: 31, CommitSequenceID: 9, AppliedEpochAuthenticator: b}, // a later entry for 9: not the one compared
		{EnvelopeSequenceID: 30, CommitSequenceID: 9, AppliedEpochAuthenticator: c},
		{EnvelopeSequenceID: 32, CommitSequenceID: 5, AppliedEpochAuthenticator: a},
		{EnvelopeSequenceID: 33, CommitSequenceID: 12, AppliedEpochAuthenticator: c},
		{EnvelopeSequenceID: 34, CommitSequenceID: 15, AppliedEpochAuthenticator: c},
	}
	rows := logRows(local, remote)
	type want struct {
		commit        uint64
		local, remote bool
		diverges      bool
	}
	wants := []want{{5, true, true, false}, {9, true, true, true}, {12, true, true, false}, {15, false, true, false}, {20, true, false, false}}
	if len(rows) != len(wants) {
		t.Fatalf("%d rows, want %d: %+v", len(rows), len(wants), rows)
	}
	for i, w := range wants {
		r := rows[i]
		if r.Commit != w.commit || (r.Local != nil) != w.local || (r.Remote != nil) != w.remote || r.Diverges != w.diverges {
			t.Errorf("row %d: %+v, want %+v", i, r, w)
		}
	}
	if rows[1].Remote.Authenticator != "03" {
		t.Errorf("commit 9 compares remote %s, want the first accepted entry's 03", rows[1].Remote.Authenticator)
	}
	if got := mark(rows[1], 2); !strings.Contains(got, "earlier membership") {
		t.Errorf("a divergence of membership 1 seen in membership 2 is marked %q", got)
	}
	if got := mark(rows[1], 1); got != "<< diverges" {
		t.Errorf("a divergence of the current membership is marked %q", got)
	}
}

func TestParseFault(t *testing.T) {
	for name := range faults {
		f, err := parseFault(name)
		if err != nil || f.String() != name {
			t.Errorf("%s: %v %v; the CLI's names are mlsfault's", name, f, err)
		}
	}
	if _, err := parseFault("nope"); !errors.Is(err, errUsage) {
		t.Errorf("unknown fault: %v", err)
	}
}

func TestHelpListsEveryCommandAndExitCode(t *testing.T) {
	var b strings.Builder
	writeHelp(&b)
	for _, c := range commands {
		if !strings.Contains(b.String(), "  "+c.name) {
			t.Errorf("help does not list %q", c.name)
		}
	}
	for _, code := range []int{exitOK, exitFailure, exitUsage, exitNotFound, exitUnavailable, exitBusy, exitInterrupted} {
		if !strings.Contains(b.String(), fmt.Sprintf("\n  %d  ", code)) && !strings.Contains(b.String(), fmt.Sprintf("\n  %d ", code)) {
			t.Errorf("help does not explain exit code %d", code)
		}
	}
}

// Any command line finds a command and parses, or fails with an error;
// none panics.
func FuzzCommandLine(f *testing.F) {
	f.Add("send\x00team\x00--json\x00hi")
	f.Add("--home\x00h\x00group\x00add\x00team\x00x")
	f.Add("sync\x00--inject-fault\x00\x00--\x00-x")
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, "\x00")
		cmd, rest, err := findCommand(args)
		if err != nil {
			return
		}
		o := opts{timeout: 1}
		pos, err := parseLine(cmd, rest, &o)
		if err == nil {
			if err := checkArity(cmd, pos); err != nil {
				t.Fatalf("parseLine accepted %q for %q: %v", pos, cmd.name, err)
			}
		}
		_, _ = pick(nil, line, "me")
	})
}
