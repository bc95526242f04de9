package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/internal/testenv"
	"github.com/regroup-mls/regroup/ports/mlsfault"
)

// demoJSON runs the demo with args and --json, and returns its exit code,
// its decoded document and what it wrote to stderr.
func demoJSON(t *testing.T, args ...string) (int, demoDoc, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := runDemo(context.Background(), append(args, "--json"), &stdout, &stderr)
	var doc demoDoc
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
		t.Fatalf("stdout is not the JSON document: %v\n%s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	return code, doc, stderr.String()
}

// checkRepaired checks a successful run: exit 0, every step printed, and
// the final tables — every member of the group and of the DM active at
// one epoch and epoch authenticator, not forked, having read every
// message.
func checkRepaired(t *testing.T, members int, code int, doc demoDoc, stderr string) {
	t.Helper()
	if code != exitOK || !doc.OK || doc.Failure != nil {
		t.Fatalf("exit %d, ok %v, failure %+v; stderr: %s", code, doc.OK, doc.Failure, stderr)
	}
	if len(doc.Steps) != demoSteps {
		t.Errorf("%d steps printed, want %d", len(doc.Steps), demoSteps)
	}
	if len(doc.Tables) != 2 {
		t.Fatalf("%d tables, want the group's and the DM's", len(doc.Tables))
	}
	for i, want := range []struct {
		rows, read int
	}{{members, members + 1}, {2, 2}} {
		tb := doc.Tables[i]
		if len(tb.Rows) != want.rows {
			t.Fatalf("%s: %d rows, want %d", tb.Title, len(tb.Rows), want.rows)
		}
		first := tb.Rows[0]
		for _, r := range tb.Rows {
			if !r.Active || r.Epoch != first.Epoch || r.Authenticator != first.Authenticator || r.ForkState != "not forked" || r.MessagesRead != want.read {
				t.Errorf("%s: %+v; want active at %s's epoch %d (%s), not forked, %d messages read", tb.Title, r, first.Member,
					first.Epoch, first.Authenticator, want.read)
			}
		}
	}
}

// The default run — embedded service, 5 members, the log-only fork —
// and the two faults that diverge the epoch secrets, repaired under
// COMP-205.
func TestDemoEmbedded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args    []string
		members int
	}{
		{nil, 5},
		{[]string{"--fault", mlsfault.RefuseWinner.String(), "--members", "2"}, 2},
		{[]string{"--fault", mlsfault.DivergeAfterMerge.String(), "--members", "2"}, 2},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			code, doc, stderr := demoJSON(t, tc.args...)
			checkRepaired(t, tc.members, code, doc, stderr)
			if doc.Backend != "embedded" {
				t.Errorf("backend %q, want embedded", doc.Backend)
			}
		})
	}
}

// The text output names every step and ends with the tables.
func TestDemoText(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if code := runDemo(context.Background(), []string{"--members", "2"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"[ 7/12]", "detection", "readd published", "rejoined group", "\ngroup ", "\nDM ", "ok: "} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
}

// Every member on a running regroupd over gRPC.
func TestDemoServer(t *testing.T) {
	t.Parallel()
	r := testenv.StartRegroupd(t, "sqlite")
	code, doc, stderr := demoJSON(t, "--server", r.Addr, "--members", "3")
	checkRepaired(t, 3, code, doc, stderr)
	if doc.Backend != "server" {
		t.Errorf("backend %q, want server", doc.Backend)
	}
}

// The delivery service and every member's store on PostgreSQL.
func TestDemoPostgres(t *testing.T) {
	t.Parallel()
	dsn := testenv.PostgresDSN(t)
	code, doc, stderr := demoJSON(t, "--postgres", dsn, "--members", "3")
	checkRepaired(t, 3, code, doc, stderr)
	if doc.Backend != "postgres" {
		t.Errorf("backend %q, want postgres", doc.Backend)
	}
}

// With responses disabled on every member no readd commit comes: the run
// fails at that step, naming it, with exitFailure.
func TestDemoFailsWithoutReadd(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	cfg := demoConfig{members: 2, fault: mlsfault.MisrecordAuthenticator, json: true, timeout: time.Minute, disableResponses: true}
	if code := demoRun(context.Background(), cfg, &stdout, &stderr); code != exitFailure {
		t.Fatalf("exit %d, want %d", code, exitFailure)
	}
	var doc demoDoc
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OK || doc.Failure == nil || doc.Failure.Step != "readd commit" {
		t.Fatalf("ok %v, failure %+v; want the readd commit step failed", doc.OK, doc.Failure)
	}
	if !strings.Contains(stderr.String(), `step "readd commit" failed`) {
		t.Errorf("stderr does not name the step: %s", stderr.String())
	}
}

// A bad command line exits with exitUsage, says what was wrong and runs
// nothing.
func TestDemoUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--members", "1"}, "--members 1"},   // a group needs two members
		{[]string{"--members", "x"}, "invalid value"}, // not a number
		{[]string{"--fault", "crash"}, `--fault "crash"`},
		{[]string{"--timeout", "0s"}, "--timeout"},
		{[]string{"--nope"}, "not defined"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		var stdout, stderr bytes.Buffer
		if code := runDemo(context.Background(), tc.args, &stdout, &stderr); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", tc.args, code, exitUsage)
		}
		if stdout.Len() != 0 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: stdout %q, stderr %q; want nothing run and %q said", tc.args, stdout.String(), stderr.String(), tc.want)
		}
	}
}
