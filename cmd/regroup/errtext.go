package main

import "strings"

// errorText returns an error's message as the CLI prints it: each line
// once. Drivers list every attempt of a failed connection on a line of
// its own, and two attempts that failed alike (TLS and then plain text,
// say) would otherwise print the same line twice.
func errorText(msg string) string {
	lines := strings.Split(msg, "\n")
	seen := make(map[string]bool, len(lines))
	out := lines[:0]
	for _, l := range lines {
		key := strings.TrimSpace(l)
		if key != "" && seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}
