package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/internal/testenv"
)

// A flag regroupd does not know is reported once, exit 2, without the
// flag package's own copy of the message and usage; -h still prints the
// usage and exits 0.
func TestBadFlagReportedOnce(t *testing.T) {
	bin := testenv.RegroupdBinary(t)
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "-no-such-flag")
	cmd.Stderr = &stderr
	err := cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 2 {
		t.Fatalf("exit %d (%v), want 2", code, err)
	}
	if n := strings.Count(stderr.String(), "-no-such-flag"); n != 1 {
		t.Errorf("the bad flag is named %d times, want once:\n%s", n, &stderr)
	}
	stderr.Reset()
	cmd = exec.Command(bin, "-h")
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("-h: %v", err)
	}
	if !strings.Contains(stderr.String(), "-max-batch") {
		t.Errorf("-h prints no usage:\n%s", &stderr)
	}
}
