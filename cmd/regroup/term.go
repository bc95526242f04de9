package main

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text a peer controls — message texts, group names, inbox ids from
// credentials, reasons that quote them — reaches the user's terminal only
// through clean or a termWriter, so that no peer can move the cursor,
// recolour, retitle or clear the terminal, hide text, or reorder a line
// with bidirectional controls. --json prints the exact strings (JSON
// escapes control characters itself) and the exact bytes of messages.

// unsafeRune reports a rune a terminal would act on instead of showing:
// C0 and C1 controls, DEL, and the bidirectional formatting characters
// (embeddings, overrides, isolates and marks).
func unsafeRune(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	}
	return unicode.Is(unicode.Bidi_Control, r)
}

// clean renders s, a string a peer controls, for one field of a line: every
// unsafe rune, newline and tab included, becomes a visible escape (\x1b,
// \u202e, \n) and every byte that is not UTF-8 becomes \xNN.
func clean(s string) string {
	return escape(s, false)
}

// escape is clean, keeping newlines and tabs when keepLayout is set (the
// layout of regroup's own output).
func escape(s string, keepLayout bool) string {
	if !needsEscape(s, keepLayout) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keepLayout && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80 && unsafeRune(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func needsEscape(s string, keepLayout bool) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n <= 1) || (unsafeRune(r) && !(keepLayout && (r == '\n' || r == '\t'))) {
			return true
		}
		i += n
	}
	return false
}

// termWriter is the net under every text a command prints: it escapes
// what clean escapes except the newlines and tabs of the layout. Fields a
// peer controls are cleaned before, so that their newlines cannot forge
// lines either.
type termWriter struct{ w io.Writer }

func (t termWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(t.w, escape(string(p), true)); err != nil {
		return 0, err
	}
	return len(p), nil
}
