package sdk_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/pqwrap"
	"github.com/regroup-mls/regroup/plugins/internal/protocol"
	"github.com/regroup-mls/regroup/plugins/sdk"
)

// roleEnv makes this test binary act as a host or as a plugin.
const roleEnv = "REGROUP_SDK_WATCHDOG_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "plugin": // a real plugin: sdk.Serve with the X-Wing wrapper
		sdk.Serve(pqwrap.NewXWing())
		os.Exit(0)
	case "host": // starts the plugin, reports its pid once it serves, waits
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), roleEnv+"=plugin",
			protocol.Handshake.MagicCookieKey+"="+protocol.Handshake.MagicCookieValue,
			fmt.Sprintf("PLUGIN_PROTOCOL_VERSIONS=%d", protocol.Handshake.ProtocolVersion))
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			fmt.Println("start:", err)
			os.Exit(1)
		}
		line, _ := bufio.NewReader(out).ReadString('\n') // go-plugin's handshake line
		fmt.Printf("plugin %d serving %s", cmd.Process.Pid, line)
		select {}
	}
	os.Exit(m.Run())
}

// COMP-330: a plugin process exits when its host is killed with SIGKILL.
func TestCOMP330_PluginExitsWhenHostIsKilled(t *testing.T) {
	host := exec.Command(os.Args[0], "-test.run=^$")
	host.Env = append(os.Environ(), roleEnv+"=host")
	out, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "plugin ") || !strings.Contains(line, "|") {
		host.Process.Kill()
		t.Fatalf("host said %q, %v", line, err)
	}
	pid, _ := strconv.Atoi(strings.Fields(line)[1])
	host.Process.Signal(syscall.SIGKILL)
	host.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("plugin %d still runs 10 s after its host was killed: %s", pid, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// alive reports a process that exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}
