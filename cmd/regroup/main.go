// Command regroup is regroup's command-line client: a one-command demo of
// a group that forks and is repaired, and the commands a user runs against
// a regroupd.
//
//	regroup demo [--members N] [--fault FAULT] [--postgres DSN] [--server ADDR] [--json|--quiet]
//	regroup init --home DIR --server ADDR
//	regroup group create|add|remove|rename|list|info ...
//	regroup dm INBOX
//	regroup send CONVERSATION TEXT...
//	regroup read CONVERSATION
//	regroup sync [CONVERSATION]
//	regroup fork-status|log|welcomes ...
//	regroup help [COMMAND]
//
// Each command but the demo opens one user's installation (its home
// directory), dials a regroupd, does its work and exits. Run
// `regroup help` for every command, its flags and the meaning of the exit
// codes; docs/getting-started.md walks through two users chatting and a
// fork being repaired.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes. Every command returns one of these; scripts may rely on them.
const (
	// exitOK: the command did what was asked.
	exitOK = 0
	// exitFailure: the command ran and failed (for the demo: an expected
	// outcome did not happen).
	exitFailure = 1
	// exitUsage: the command line is wrong; nothing was done.
	exitUsage = 2
	// exitNotFound: what the command names does not exist here: no
	// identity in the home, no such conversation, an unknown inbox.
	exitNotFound = 3
	// exitUnavailable: regroupd could not be reached (or did not answer
	// in time).
	exitUnavailable = 4
	// exitBusy: another regroup command held the home for all of
	// --timeout; nothing was done.
	exitBusy = 5
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command of args and returns its exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "regroup: no command; run `regroup help` for the list, or `regroup demo` to see regroup work")
		return exitUsage
	}
	if args[0] == "demo" {
		return runDemo(ctx, args[1:], stdout, stderr)
	}
	return runCLI(ctx, args, stdout, stderr)
}
