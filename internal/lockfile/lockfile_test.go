package lockfile

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

const envHold = "LOCKFILE_TEST_HOLD"

// A second Acquire of one file fails with a HeldError naming this
// process, even inside the process that holds it; after Release the
// file can be locked again.
func TestAcquireIsExclusive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	l, err := Acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(path)
	var held *HeldError
	if !errors.Is(err, ErrHeld) || !errors.As(err, &held) || held.PID != os.Getpid() {
		t.Fatalf("second Acquire: %v, want ErrHeld naming pid %d", err, os.Getpid())
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := Acquire(path)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	if err := l2.Release(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("lock file: %v, %v; want mode 0600", fi, err)
	}
}

// Another process holding the lock is refused and named; once it is
// killed (no Release), the kernel frees the lock.
func TestAcquireAcrossProcesses(t *testing.T) {
	if path := os.Getenv(envHold); path != "" {
		if _, err := Acquire(path); err != nil {
			os.Stdout.WriteString("error " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Stdout.WriteString("held\n")
		select {} // until killed
	}
	path := filepath.Join(t.TempDir(), "x.lock")
	cmd := exec.Command(os.Args[0], "-test.run=^TestAcquireAcrossProcesses$")
	cmd.Env = append(os.Environ(), envHold+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "held\n" {
		t.Fatalf("child: %q, %v", line, err)
	}
	_, err = Acquire(path)
	var held *HeldError
	if !errors.As(err, &held) || held.PID != cmd.Process.Pid {
		t.Fatalf("Acquire while the child holds it: %v, want a HeldError naming pid %d", err, cmd.Process.Pid)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	l, err := Acquire(path)
	if err != nil {
		t.Fatalf("Acquire after the holder was killed: %v", err)
	}
	_ = l.Release()
}

// A lock file in a directory that does not exist is an error of its
// own, not ErrHeld.
func TestAcquireMissingDirectory(t *testing.T) {
	_, err := Acquire(filepath.Join(t.TempDir(), "no", "such", "x.lock"))
	if err == nil || errors.Is(err, ErrHeld) {
		t.Fatalf("Acquire in a missing directory: %v", err)
	}
}
