package main

import (
	"context"
	"fmt"
	"io"
)

// runCLI runs every command but the demo.
func runCLI(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintf(stderr, "regroup: unknown command %q\n", args[0])
	return exitUsage
}
