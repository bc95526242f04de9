package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// helpIntro opens `regroup help`.
const helpIntro = `regroup is the command-line client of regroup: MLS group messaging whose
members detect a forked group from its commit log and get it repaired.

Each command opens the home's installation, dials regroupd, does its work
and exits. The home (--home DIR, else $REGROUP_HOME, else ~/.regroup) holds
the installation's SQLite store and the server address saved by init.

Conversations are named by their id in hex (a unique prefix is enough), by
a group's name, or by a DM peer's inbox id.

Consent: the commit log, which detects forks, is read only for conversations
you allowed. Creating a conversation, reading it or sending to it allows it;
a conversation you were only added to stays "unknown" until you do.

Commands:
`

// helpExitCodes closes `regroup help`.
const helpExitCodes = `
Flags every command takes (before or after its arguments):
  --home DIR       this user's installation (default $REGROUP_HOME, else ~/.regroup)
  --server ADDR    regroupd's gRPC address (default: the one init saved; init: 127.0.0.1:5050);
                   repeat it, or separate with commas, for replicas sharing one database
  --tls            reach regroupd over TLS (init saves it, with the two below)
  --ca-file FILE   PEM certificate of the authority that signed regroupd's (implies --tls)
  --server-name N  the name regroupd's certificate holds, when not the address's host
  --recover MODE   all (default) or none: ask to be readded to conversations found forked
  --respond        answer others' readd requests (default true; --respond=false)
  --repair-diverged  accept a readder's Welcome for a fork whose epoch secrets diverged
                   (default true); init saves these three as the home's policy
  --json           print JSON with stable field names, for scripts (docs/cli-json.md)
  --timeout D      give up after D (default 1m)
  --version        print the version
Put -- before a message that starts with "-".

Exit codes:
  0  done
  1  the command ran and failed (the message says why)
  2  usage: the command line is wrong; nothing was done
  3  not found: no identity in the home (run regroup init), no such
     conversation, or an unknown inbox
  4  regroupd unreachable (the message says why: refused, TLS, its
     database), or no answer within --timeout
  5  busy: another regroup command used the home for all of --timeout
     (one home is one client: a second command waits for the first)
  130 interrupted (Ctrl-C or SIGTERM)
`

// runHelp prints every command, or one command's help.
func runHelp(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) > 0 && args[0] == "demo":
		_, _ = demoParse([]string{"-h"}, stdout)
		return exitOK
	case len(args) == 1 && args[0] == "group":
		fmt.Fprint(stdout, "usage: regroup group SUBCOMMAND [flags] ARGS...\n\nsubcommands:\n")
		for _, c := range commands {
			if strings.HasPrefix(c.name, "group ") {
				fmt.Fprintf(stdout, "  %-44s %s\n", strings.TrimSpace(c.name+" "+c.args), c.summary)
			}
		}
		fmt.Fprint(stdout, "\n`regroup help group SUBCOMMAND` shows one with its flags.\n")
		return exitOK
	}
	if len(args) > 0 {
		cmd, _, err := findCommand(args)
		if err != nil {
			fmt.Fprintf(stderr, "regroup help: %v\n", err)
			return exitUsage
		}
		writeCommandHelp(stdout, cmd)
		return exitOK
	}
	writeHelp(stdout)
	return exitOK
}

// writeHelp prints the whole help.
func writeHelp(w io.Writer) {
	fmt.Fprint(w, helpIntro)
	fmt.Fprintf(w, "  %-44s %s\n", "demo [--members N] [--postgres DSN] [--server ADDR]", "a group that forks and is repaired, in one command")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-44s %s\n", strings.TrimSpace(c.name+" "+c.args), c.summary)
		if c.flags != nil {
			fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
			c.flags(fs, &opts{})
			fs.VisitAll(func(f *flag.Flag) {
				name, usage := flag.UnquoteUsage(f)
				fmt.Fprintf(w, "  %-44s %s\n", "    --"+f.Name+" "+name, usage)
			})
		}
	}
	fmt.Fprint(w, helpExitCodes)
	fmt.Fprintln(w, "\nA fork on purpose: `regroup sync --inject-fault misrecord-authenticator CONVERSATION` is a fault\n"+
		"injector for demonstrations: it makes the next commit this sync merges misrecorded in the commit log, so\n"+
		"the log diverges, the conversation reads forked, and the repair (readd request, readd commit, rejoin) runs.\n"+
		"See docs/getting-started.md.")
	fmt.Fprint(w, helpCustody)
}

// writeCommandHelp prints one command's usage and flags.
func writeCommandHelp(w io.Writer, c command) {
	fmt.Fprintf(w, "usage: regroup %s\n\n%s\n\nflags:\n", strings.TrimSpace(c.name+" [flags] "+c.args), c.summary)
	fs := newFlagSet(c, &opts{timeout: time.Minute})
	fs.SetOutput(w)
	fs.PrintDefaults()
}
