package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// command is one CLI command.
type command struct {
	name    string
	args    string // the positional arguments, for help
	summary string
	// flags adds the command's own flags to fs; nil when it has none.
	flags func(fs *flag.FlagSet, o *opts)
	// run does the command on an open session.
	run func(ctx context.Context, e *env) error
	// init opens no session of an existing home (init only).
	init bool
}

// opts are the values of every flag a command line may carry.
type opts struct {
	home, server string
	json         bool
	timeout      time.Duration
	// TLS flags override the home's saved way to reach regroupd (dial.go)
	tls                optBool
	caFile, serverName string
	// recovery flags override the home's saved policy (recovery.go)
	recover                 string
	respond, repairDiverged optBool
	// command flags
	limit int
	fault string
	// custody are the flags of init, approve, revoke and
	// export-recovery-key (installations.go).
	custody custodyOpts
}

// env is what a command runs with: its parsed line, the open session and
// the output.
type env struct {
	o    opts
	args []string
	s    *session
	out  *output
	// failed is the session whose opening failed, closed, kept for the
	// explanation of the error.
	failed *session
	// stdoutTerm and stderrTerm report terminals, for the progress bar.
	stdoutTerm, stderrTerm bool
}

// commands are the CLI's commands in the order help lists them.
var commands []command

func init() {
	commands = []command{
		{name: "init", init: true, summary: "create an inbox and this installation in the home, publish its key package, save the server address; " +
			"print the inbox's recovery key once (kept by you, not stored), or with --join make another installation of an inbox",
			flags: initFlags, run: cmdInit},
		{name: "whoami", summary: "print this installation's inbox id, installation key, home and server", run: cmdWhoami},
		{name: "installations", summary: "the inbox's installations, each with the installation that approved it", run: cmdInstallations},
		{name: "approve", args: "REQUEST", summary: "add the installation that `init --join` made to this inbox, approved by this installation", run: cmdApprove},
		{name: "revoke", args: "INSTALLATION", summary: "revoke an installation of the inbox (asks for the recovery key); names those it approved",
			flags: revokeFlags, run: cmdRevoke},
		{name: "export-recovery-key", summary: "move the recovery key a home made by an older regroup stores into a file",
			flags: exportFlags, run: cmdExportRecoveryKey},
		{name: "group create", args: "NAME [INBOX...]", summary: "create a group named NAME with the given member inboxes", run: cmdGroupCreate},
		{name: "group add", args: "CONVERSATION INBOX...", summary: "add inboxes (every installation with a valid key package)", run: cmdGroupAdd},
		{name: "group remove", args: "CONVERSATION INBOX...", summary: "remove inboxes (every installation)", run: cmdGroupRemove},
		{name: "group rename", args: "CONVERSATION NAME", summary: "change a group's name (a commit, like add and remove)", run: cmdGroupRename},
		{name: "group list", summary: "sync, then list conversations: id, type, name, epoch, fork state, consent", run: cmdGroupList},
		{name: "group info", args: "CONVERSATION", summary: "a conversation's metadata, members, epoch and fork state", run: cmdGroupInfo},
		{name: "dm", args: "INBOX", summary: "open (or create) the DM with INBOX and print its id", run: cmdDM},
		{name: "send", args: "CONVERSATION [TEXT...]", summary: "sync, then send TEXT (without TEXT, or with -, the message is read from standard input); allows the conversation", run: cmdSend},
		{name: "read", args: "CONVERSATION", summary: "sync, then print the messages; allows the conversation",
			flags: func(fs *flag.FlagSet, o *opts) {
				fs.IntVar(&o.limit, "limit", 0, "print only the last `N` messages (0: all)")
			}, run: cmdRead},
		{name: "sync", args: "[CONVERSATION]", summary: "process Welcomes, every topic and commit log, and the fork repair; print what changed",
			flags: func(fs *flag.FlagSet, o *opts) {
				fs.StringVar(&o.fault, "inject-fault", "", "FAULT INJECTOR FOR DEMONSTRATIONS: arm `FAULT` (misrecord-authenticator, "+
					"diverge-after-merge, refuse-winner) on CONVERSATION for the next commit this sync merges")
			}, run: cmdSync},
		{name: "fork-status", args: "[CONVERSATION]", summary: "fork state, maybe_forked and its reason, last shared commit (local state)", run: cmdForkStatus},
		{name: "log", args: "CONVERSATION", summary: "local and accepted remote commit-log entries side by side, the diverging row marked (local state)", run: cmdLog},
		{name: "welcomes", summary: "held and rejected Welcomes, with reasons and deadlines (local state)", run: cmdWelcomes},
		{name: "move", summary: "point this home at another regroupd (--server, --tls, --ca-file, --server-name) that holds its inbox, and save it; " +
			"also saves --recover, --respond and --repair-diverged", run: cmdMove},
		{name: "version", summary: "print regroup's version, revision and Go version (also --version)"},
		{name: "help", args: "[COMMAND]", summary: "this help"},
	}
}

// runCLI runs every command but the demo.
func runCLI(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd, rest, err := findCommand(args)
	if err != nil {
		fmt.Fprintf(stderr, "regroup: %v\n", err)
		if wantsJSON(args) {
			emitError(stdout, "", exitUsage, err.Error())
		}
		return exitUsage
	}
	switch cmd.name {
	case "help":
		return runHelp(rest, stdout, stderr)
	case "version":
		printVersion(stdout)
		return exitOK
	}
	e := &env{o: opts{timeout: time.Minute}}
	e.args, err = parseLine(cmd, rest, &e.o)
	if errors.Is(err, flag.ErrHelp) {
		writeCommandHelp(stdout, cmd)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "regroup %s: %s\nusage: regroup %s %s\n", cmd.name, escape(err.Error(), true), cmd.name, cmd.args)
		if e.o.json || wantsJSON(rest) {
			emitError(stdout, cmd.name, exitUsage, err.Error())
		}
		return exitUsage
	}
	e.out = &output{w: stdout, json: e.o.json}
	e.stdoutTerm, e.stderrTerm = isTerminalWriter(stdout), isTerminalWriter(stderr)
	sig := ctx
	ctx, cancel := context.WithTimeout(ctx, e.o.timeout)
	defer cancel()
	err = interrupted(sig, runCommand(ctx, cmd, e, stderr))
	if err != nil {
		s := e.s
		if s == nil {
			s = e.failed
		}
		msg := errorText(explain(ctx, err, s, e.o))
		fmt.Fprintf(stderr, "regroup %s: %s\n", cmd.name, escape(msg, true))
		if e.o.json {
			emitError(stdout, cmd.name, exitCode(err), msg)
		}
	}
	return exitCode(err)
}

// runCommand opens the home's session, runs cmd and closes the session.
func runCommand(ctx context.Context, cmd command, e *env, stderr io.Writer) error {
	home, err := homeDir(e.o.home)
	if err != nil {
		return err
	}
	e.o.home = home
	if cmd.init {
		return cmd.run(ctx, e)
	}
	warn := func(format string, a ...any) {
		fmt.Fprintf(stderr, "regroup %s: warning: %s\n", cmd.name, escape(fmt.Sprintf(format, a...), true))
	}
	s, err := openSession(ctx, openOptions{home: home, server: e.o.server, flags: e.o, warn: warn})
	if err != nil {
		e.failed = s
		return err
	}
	e.s = s
	defer e.s.Close()
	if cmd.name != "export-recovery-key" {
		warnLegacyRecoveryKey(e.s)
	}
	if showProgress(e.stdoutTerm, e.stderrTerm, e.o.json) {
		e.s.progressOut = stderr
	}
	return cmd.run(ctx, e)
}

// wantsJSON reports whether a command line that could not be parsed asks
// for --json, so that its usage error is a JSON document too.
func wantsJSON(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--json", "-json", "--json=true", "-json=true":
			return true
		}
	}
	return false
}

// findCommand finds the command named by the first one or two words of
// args (`group` takes a subcommand) and returns the rest.
func findCommand(args []string) (command, []string, error) {
	lead, args := leadingFlags(args)
	global := newFlagSet(command{}, &opts{})
	for i := 0; i < len(lead); i++ {
		name, _, value := strings.Cut(strings.TrimLeft(lead[i], "-"), "=")
		f := global.Lookup(name)
		if f == nil {
			return command{}, nil, fmt.Errorf("unknown flag %s before the command; `regroup help` lists the flags", lead[i])
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !value && !(ok && b.IsBoolFlag()) {
			i++ // its value
		}
	}
	if len(args) == 0 {
		return command{}, nil, fmt.Errorf("no command; run `regroup help`")
	}
	name, rest := args[0], args[1:]
	if name == "group" {
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			return command{}, nil, fmt.Errorf("group needs a subcommand: create, add, remove, rename, list or info")
		}
		name, rest = "group "+rest[0], rest[1:]
	}
	for _, c := range commands {
		if c.name == name {
			return c, append(lead, rest...), nil
		}
	}
	return command{}, nil, fmt.Errorf("unknown command %q; run `regroup help` for the list", name)
}

// leadingFlags splits the global flags written before the command
// (`regroup --home DIR read team`) from the rest.
func leadingFlags(args []string) (lead, rest []string) {
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "--" && args[0] != "-" {
		n := 1
		switch name := strings.TrimLeft(args[0], "-"); name {
		case "home", "server", "timeout", "recover", "ca-file", "server-name":
			n = 2
		case "h", "help":
			return lead, append([]string{"help"}, args[1:]...)
		case "version":
			return lead, append([]string{"version"}, args[1:]...)
		}
		n = min(n, len(args))
		lead, args = append(lead, args[:n]...), args[n:]
	}
	return lead, args
}

// newFlagSet returns the flags of cmd: the global ones and its own.
func newFlagSet(cmd command, o *opts) *flag.FlagSet {
	fs := flag.NewFlagSet("regroup "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.home, "home", "", "the `DIR` holding this user's installation (default $"+homeEnv+", else ~/.regroup)")
	fs.Var((*serverFlag)(&o.server), "server", "regroupd gRPC `ADDR`ess, host:port; repeated or comma-separated for replicas sharing one database "+
		"(default: the one saved by init; init's default "+defaultServer+")")
	fs.Var(&o.tls, "tls", "reach regroupd over TLS (default: as saved by init, else plain text)")
	fs.StringVar(&o.caFile, "ca-file", "", "PEM `FILE` of the authority that signed regroupd's certificate (implies --tls; default: the system's)")
	fs.StringVar(&o.serverName, "server-name", "", "the `NAME` regroupd's certificate must hold (implies --tls; default: the address's host)")
	fs.BoolVar(&o.json, "json", false, "print JSON for scripts instead of text")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "give up after this `duration`")
	addRecoveryFlags(fs, o)
	if cmd.flags != nil {
		cmd.flags(fs, o)
	}
	return fs
}

// parseLine parses the flags of cmd wherever they stand on the line and
// returns the positional arguments; everything after `--` is positional.
func parseLine(cmd command, args []string, o *opts) ([]string, error) {
	fs := newFlagSet(cmd, o)
	var tail []string
	for i, a := range args {
		if a == "--" {
			args, tail = args[:i], args[i+1:]
			break
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if args = fs.Args(); len(args) == 0 {
			break
		}
		pos, args = append(pos, args[0]), args[1:] // fs.Parse stops at a positional argument
	}
	pos = append(pos, tail...)
	if err := checkArity(cmd, pos); err != nil {
		return nil, err
	}
	if o.timeout <= 0 {
		return nil, fmt.Errorf("--timeout must be positive")
	}
	return pos, nil
}

// checkArity checks the number of positional arguments of cmd against
// its usage line.
func checkArity(cmd command, pos []string) error {
	min, max := 0, 0
	for _, w := range strings.Fields(cmd.args) {
		switch {
		case strings.HasSuffix(w, "...]"):
			max = -1
		case strings.HasSuffix(w, "..."):
			min, max = min+1, -1
		case strings.HasPrefix(w, "["):
			if max >= 0 {
				max++
			}
		default:
			min++
			if max >= 0 {
				max++
			}
		}
	}
	switch {
	case len(pos) < min:
		return fmt.Errorf("missing arguments")
	case max >= 0 && len(pos) > max:
		return fmt.Errorf("unexpected argument %q", pos[max])
	}
	return nil
}

// exitCode maps a command's error to the process's exit code.
func exitCode(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errUsage):
		return exitUsage
	case errors.Is(err, errBusy):
		return exitBusy
	case errors.Is(err, errInterrupted):
		return exitInterrupted
	case errors.Is(err, errNoIdentity), errors.Is(err, errNotFound), errors.Is(err, ports.ErrNotFound):
		return exitNotFound
	case errors.Is(err, ports.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return exitUnavailable
	}
	return exitFailure
}

// explain adds to err what the user can do next, when the error class
// says it; for a regroupd that could not be used it finds out why.
func explain(ctx context.Context, err error, s *session, o opts) string {
	msg := err.Error()
	if errors.Is(err, ports.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ports.ErrUnauthenticated) {
		msg, _, _ = strings.Cut(msg, "\n") // the same failure, once per topic
		server, tc := o.server, (*tls.Config)(nil)
		if s != nil {
			server, tc = s.server, s.tlsConfig
		}
		if server == "" {
			return msg + "\nregroupd at the saved server is not reachable: start it (`go run ./cmd/regroupd`), or pass --server ADDR"
		}
		msg += "\nregroupd at " + strings.ReplaceAll(diagnose(ctx, server, tc, err), "\n", "\nregroupd at ")
	}
	return msg
}

// isTerminalWriter reports whether w is a terminal *os.File.
func isTerminalWriter(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isTerminal(f)
}

// output prints a command's result as text or, with --json, as one JSON
// document.
type output struct {
	w    io.Writer
	json bool
}

// emit prints v as JSON, or calls text to print it for a person.
func (o *output) emit(v any, text func(w io.Writer)) error {
	if o.json {
		enc := json.NewEncoder(o.w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	text(termWriter{o.w})
	return nil
}
