package main

import (
	"context"
	"fmt"
	"io"
)

// runDemo runs the demo.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "regroup demo: not available in this build")
	return exitFailure
}
