package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/regroup-mls/regroup/internal/buildinfo"
)

// exitInterrupted is the exit code of a command or demo stopped by
// SIGINT or SIGTERM (128 + SIGINT, as shells report it).
const exitInterrupted = 130

// errInterrupted reports a command stopped by a signal.
var errInterrupted = errors.New("interrupted")

// interrupted wraps err as errInterrupted when sig, the context the
// signals cancel, has ended: Ctrl-C is the user's choice, not a failure.
func interrupted(sig context.Context, err error) error {
	if err != nil && sig.Err() != nil && !errors.Is(err, errInterrupted) {
		return fmt.Errorf("%w (%v)", errInterrupted, firstLine(err))
	}
	return err
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// printVersion prints `regroup --version`.
func printVersion(w io.Writer) {
	fmt.Fprintf(w, "regroup %s\n", buildinfo.Read())
}

// Group names (COMP-342): at least one character, at most
// maxGroupNameRunes, UTF-8. A peer's name is still cleaned for the
// terminal (term.go), whatever its client allowed.
const maxGroupNameRunes = 100

// checkGroupName refuses a name a person could not use.
func checkGroupName(name string) error {
	switch n := utf8.RuneCountInString(name); {
	case !utf8.ValidString(name):
		return usagef("the group name is not UTF-8 text")
	case strings.TrimSpace(name) == "":
		return usagef("the group name is empty: give one, e.g. `regroup group create team INBOX`")
	case n > maxGroupNameRunes:
		return usagef("the group name has %d characters; at most %d", n, maxGroupNameRunes)
	}
	return nil
}

// maxStdinMessage bounds a message read from standard input; the
// delivery service's own envelope limit is 1 MiB by default.
const maxStdinMessage = 512 << 10

// stdin is where `send` reads a message given as "-" or not at all.
var stdin io.Reader = os.Stdin

// messageText returns send's text: its arguments joined by spaces, or,
// when there are none or the only one is "-", standard input (a trailing
// newline dropped).
func messageText(args []string) (string, error) {
	if len(args) > 0 && !(len(args) == 1 && args[0] == "-") {
		return strings.Join(args, " "), nil
	}
	b, err := io.ReadAll(io.LimitReader(stdin, maxStdinMessage+1))
	if err != nil {
		return "", fmt.Errorf("read the message from standard input: %w", err)
	}
	if len(b) > maxStdinMessage {
		return "", usagef("the message on standard input is larger than %d bytes", maxStdinMessage)
	}
	text := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if text == "" {
		return "", usagef("no message: give TEXT, or pipe it to `regroup send CONVERSATION -`")
	}
	return text, nil
}
