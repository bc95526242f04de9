package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/regroup-mls/regroup/ports/mlsfault"
)

// demoMaxMembers bounds --members: every member syncs every other's
// commits, so the run grows with the square of the group.
const demoMaxMembers = 50

// demoNames are the members' names; beyond them members are numbered.
var demoNames = []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy"}

// demoFaults are the faults --fault accepts, by name.
var demoFaults = []mlsfault.Fault{mlsfault.MisrecordAuthenticator, mlsfault.RefuseWinner, mlsfault.DivergeAfterMerge}

// demoConfig is the demo's command line.
type demoConfig struct {
	members  int
	postgres string
	server   string
	fault    mlsfault.Fault
	quiet    bool
	json     bool
	timeout  time.Duration
	// disableResponses stops every member from publishing readd commits,
	// so the repair cannot happen and the demo must fail at the readd. It
	// has no flag: the tests set it to check that a missing outcome fails
	// the run.
	disableResponses bool
}

// errDemoUsage is wrapped by every error of the demo's command line.
var errDemoUsage = errors.New("bad command line")

const demoUsage = `usage: regroup demo [flags]

Runs a group of members on a delivery service, forks one member for real,
and shows the commit log detect the fork and the readd repair it. It exits
0 when every expected outcome happened, 1 naming the step that failed, 2
on a bad command line.

By default the delivery service runs in this process on a SQLite file and
every member keeps its state in its own SQLite file, all in a temporary
directory removed at the end.

flags:
`

// demoParse parses the demo's arguments.
func demoParse(args []string, stderr io.Writer) (demoConfig, error) {
	cfg := demoConfig{}
	fs := flag.NewFlagSet("regroup demo", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // a bad flag is reported once, by runDemo
	fs.IntVar(&cfg.members, "members", 5, "members of the group, at least 2")
	fs.StringVar(&cfg.postgres, "postgres", "", "PostgreSQL DSN: the delivery service (unless --server) and every member's store, each in a fresh schema dropped at the end")
	fs.StringVar(&cfg.server, "server", "", "address host:port of a running regroupd every member connects to (plaintext)")
	fault := fs.String("fault", mlsfault.MisrecordAuthenticator.String(), "the fork to induce: "+demoFaultNames())
	fs.BoolVar(&cfg.quiet, "quiet", false, "print the final tables only")
	fs.BoolVar(&cfg.json, "json", false, "print one JSON document of the steps and final tables instead of text")
	fs.DurationVar(&cfg.timeout, "timeout", 2*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, demoUsage)
			fs.SetOutput(stderr)
			fs.PrintDefaults()
			return cfg, err
		}
		return cfg, fmt.Errorf("%w: %v", errDemoUsage, err)
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("%w: unexpected argument %q", errDemoUsage, fs.Arg(0))
	}
	if cfg.members < 2 || cfg.members > demoMaxMembers {
		return cfg, fmt.Errorf("%w: --members %d: want 2 to %d", errDemoUsage, cfg.members, demoMaxMembers)
	}
	if cfg.timeout <= 0 {
		return cfg, fmt.Errorf("%w: --timeout %v: want a positive duration", errDemoUsage, cfg.timeout)
	}
	for _, f := range demoFaults {
		if f.String() == *fault {
			cfg.fault = f
		}
	}
	if cfg.fault == 0 {
		return cfg, fmt.Errorf("%w: --fault %q: want one of %s", errDemoUsage, *fault, demoFaultNames())
	}
	return cfg, nil
}

func demoFaultNames() string {
	var names []string
	for _, f := range demoFaults {
		names = append(names, f.String())
	}
	return strings.Join(names, ", ")
}

// runDemo runs the demo.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := demoParse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "regroup demo: %v\nrun `regroup demo -h` for the flags\n", err)
		return exitUsage
	}
	return demoRun(ctx, cfg, stdout, stderr)
}

// demoRun runs the demo of cfg and returns its exit code.
func demoRun(ctx context.Context, cfg demoConfig, stdout, stderr io.Writer) int {
	sig := ctx
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	out := newDemoOutput(cfg, stdout)
	sc := &demoScenario{cfg: cfg, out: out}
	err := sc.run(ctx)
	sc.close()
	if sig.Err() != nil {
		fmt.Fprintln(stderr, "regroup demo: interrupted")
		return exitInterrupted
	}
	out.finish(err)
	if err != nil {
		fmt.Fprintf(stderr, "regroup demo: %s\n", errorText(err.Error()))
		return exitFailure
	}
	return exitOK
}
