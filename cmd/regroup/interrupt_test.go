package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"testing"
)

// Ctrl-C during the demo is the user's choice: the demo stops, says so
// and exits 130, not 1 (a failed outcome).
func TestDemoInterruptExits130(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the regroup binary")
	}
	cmd := exec.Command(cliBinary(t), "demo", "--members", "2")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil { // the demo has started
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitInterrupted {
		t.Fatalf("demo after SIGINT: %v, want exit %d", err, exitInterrupted)
	}
}
