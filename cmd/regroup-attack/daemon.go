package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/regroup-mls/regroup/adapters/deliverydb"
)

// daemon is one regroupd process under attack.
type daemon struct {
	cmd    *exec.Cmd
	addr   string
	extra  []string // the -extra-listen addresses, as logged
	exited chan error
	drop   func()
}

// target says which regroupd to attack and on which database.
type target struct {
	bin      string
	db       string // "sqlite" or "postgres"
	dsn      string // PostgreSQL DSN
	dir      string // for SQLite files
	settings map[string]string
	pprof    string // when set, the health listener serving Go profiles
}

// start runs a fresh regroupd on 127.0.0.1 over a fresh database. Settings
// travel as REGROUPD_* environment variables, which a regroupd that does
// not know one ignores (so the same attack runs against older builds).
func (tg target) start(name string) (*daemon, error) {
	args := []string{"-listen", "127.0.0.1:0", "-health-listen", "", "-log-level", "info"}
	if tg.pprof != "" {
		args = append(args, "-health-listen", tg.pprof, "-pprof")
	}
	drop := func() {}
	switch tg.db {
	case "sqlite":
		args = append(args, "-database", fmt.Sprintf("%s/%s-%d.db", tg.dir, name, time.Now().UnixNano()))
	case "postgres":
		schema := deliverydb.FreshSchemaName()
		args = append(args, "-database", tg.dsn, "-postgres-schema", schema)
		drop = func() {
			ctx := context.Background()
			if s, err := deliverydb.OpenPostgres(ctx, tg.dsn, &deliverydb.Options{Schema: schema}); err == nil {
				s.DropSchema(ctx)
				s.Close()
			}
		}
	default:
		return nil, fmt.Errorf("unknown database %q", tg.db)
	}
	cmd := exec.Command(tg.bin, args...)
	cmd.Env = os.Environ()
	for k, v := range tg.settings {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &daemon{cmd: cmd, exited: make(chan error, 1), drop: drop}
	ready := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		var extra []string
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "regroupd also listening" {
				addr, _ := line["grpc_addr"].(string)
				extra = append(extra, addr)
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "regroupd listening" {
				addr, _ := line["grpc_addr"].(string)
				ready <- append([]string{addr}, extra...)
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	go func() { d.exited <- cmd.Wait() }()
	select {
	case addrs := <-ready:
		d.addr, d.extra = addrs[0], addrs[1:]
		return d, nil
	case err := <-d.exited:
		drop()
		return nil, fmt.Errorf("regroupd exited before listening: %v", err)
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-d.exited
		drop()
		return nil, errors.New("regroupd did not listen within 30s")
	}
}

// stop ends the daemon (SIGKILL: an attacked server may not stop in
// time) and drops its database.
func (d *daemon) stop() {
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
	d.drop()
}

// rssMiB returns the daemon's resident set size now, in MiB.
func (d *daemon) rssMiB() (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			kb, err := strconv.ParseFloat(f[1], 64)
			return kb / 1024, err
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}

// cpuSeconds returns the CPU time (user + system) the daemon used so far.
func (d *daemon) cpuSeconds() (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces) start at ")".
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return (utime + stime) / 100, nil // USER_HZ is 100 on Linux
}

// peak samples the daemon's RSS every 50ms until ctx ends and returns
// the highest sample.
func (d *daemon) peak(ctx context.Context) float64 {
	var top float64
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if r, err := d.rssMiB(); err == nil && r > top {
			top = r
		}
		select {
		case <-ctx.Done():
			return top
		case <-t.C:
		}
	}
}

// idle waits until the daemon used under 2% of a core over 300ms, or
// limit passed.
func (d *daemon) idle(limit time.Duration) {
	end := time.Now().Add(limit)
	prev, _ := d.cpuSeconds()
	for time.Now().Before(end) {
		time.Sleep(300 * time.Millisecond)
		now, _ := d.cpuSeconds()
		if now-prev < 0.006 {
			return
		}
		prev = now
	}
}
