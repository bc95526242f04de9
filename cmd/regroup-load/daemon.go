package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// daemon is one regroupd process.
type daemon struct {
	cmd        *exec.Cmd
	addr       string
	healthAddr string
	exited     chan error
	// memory is what regroupd logged about its memory limit (COMP-337):
	// its Go memory at start-up and its read budget, in bytes; zero when
	// it logged no such line.
	memBase, readBudget int64
}

// daemonArgs is how one regroupd of a run is started.
type daemonArgs struct {
	bin      string
	listen   string
	health   string // health listener; empty picks a free loopback port
	database string
	schema   string
	// notify makes replicas sharing one PostgreSQL database wake each
	// other's subscribers.
	notify bool
	pprof  bool
	// extra flags, appended after the run's own.
	extra []string
}

func startDaemon(a daemonArgs) (*daemon, error) {
	// The run measures the server, not its rate limits: every token
	// bucket (connection, installation, address, server) is off.
	health := a.health
	if health == "" {
		health = "127.0.0.1:0"
	}
	args := []string{"-listen", a.listen, "-health-listen", health, "-database", a.database,
		"-rate", "-1", "-identity-rate", "-1", "-global-rate", "-1", "-address-rate", "-1", "-log-level", "info"}
	if a.schema != "" {
		args = append(args, "-postgres-schema", a.schema)
	}
	if a.notify {
		args = append(args, "-postgres-notify")
	}
	if a.pprof {
		args = append(args, "-pprof")
	}
	args = append(args, a.extra...)
	cmd := exec.Command(a.bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &daemon{cmd: cmd, exited: make(chan error, 1)}
	ready := make(chan map[string]any, 1)
	memory := make(chan map[string]any, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			if lvl, _ := line["level"].(string); lvl == "WARN" || lvl == "ERROR" || line["msg"] == "slow reader shed" || line["msg"] == "connection shed: responses make no progress" {
				fmt.Fprintf(os.Stderr, "regroupd: %s\n", sc.Bytes())
			}
			switch line["msg"] {
			case "regroupd listening":
				ready <- line
			case "memory limit follows the budgets":
				select {
				case memory <- line:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	go func() { d.exited <- cmd.Wait() }()
	select {
	case line := <-ready:
		d.addr, _ = line["grpc_addr"].(string)
		d.healthAddr, _ = line["health_addr"].(string)
		select {
		case m := <-memory: // logged before listening
			base, _ := m["base_bytes"].(float64)
			budget, _ := m["read_budget_bytes"].(float64)
			d.memBase, d.readBudget = int64(base), int64(budget)
		default:
		}
		return d, nil
	case err := <-d.exited:
		return nil, fmt.Errorf("regroupd exited before listening: %v", err)
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-d.exited
		return nil, errors.New("regroupd did not listen within 30s")
	}
}

// restartDaemon starts a again on the addresses d had, retrying while the
// old process's ports are still being released.
func restartDaemon(a daemonArgs, d *daemon) (*daemon, error) {
	a.listen, a.health = d.addr, d.healthAddr
	t0 := time.Now()
	for {
		nd, err := startDaemon(a)
		if err == nil {
			return nd, nil
		}
		if time.Since(t0) > 20*time.Second {
			return nil, fmt.Errorf("restart after SIGKILL: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (d *daemon) kill() {
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
}

func (d *daemon) stop() error {
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.exited:
		return err
	case <-time.After(20 * time.Second):
		d.kill()
		return errors.New("regroupd ignored SIGTERM for 20s")
	}
}

// profile writes a CPU profile of d taken over the next seconds to path.
func (d *daemon) profile(ctx context.Context, seconds int, path string) error {
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", d.healthAddr, seconds)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
