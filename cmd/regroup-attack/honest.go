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
	"time"
)

// The honest clients of the fair-share run live in a process of their
// own when regroup-attack runs from its command line: the adversaries'
// goroutines, buffers and garbage collection in this process would
// otherwise slow the honest calls measured beside them, which says
// nothing about the server (a real adversary runs on its own machine).
// The child keeps its clients, connections and topics for the whole row,
// so every phase measures the same workload; the parent asks it for one
// phase at a time over standard input and reads the latencies back.

// honestChildFlag starts the child: regroup-attack -honest-child ADDR N.
const honestChildFlag = "-honest-child"

// honestExe is the executable that runs honest children; empty (tests)
// runs the honest clients in this process.
var honestExe string

// honestRunner is an honest load, in this process or a child.
type honestRunner interface {
	run(ctx context.Context, d time.Duration) *latencies
	close()
}

// phaseJSON is one phase's latencies as the child reports them.
type phaseJSON struct {
	Ops, Failed int
	FirstErr    string
	ByOp        map[string][]time.Duration
}

// startHonest starts n honest clients of addr.
func startHonest(addr string, n int) (honestRunner, error) {
	if honestExe == "" {
		return newHonest(addr, n)
	}
	cmd := exec.Command(honestExe, honestChildFlag, addr, strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &honestChild{cmd: cmd, in: in, out: bufio.NewReader(out)}
	if _, err := c.phase(0); err != nil { // connected
		c.close()
		return nil, fmt.Errorf("honest clients: %w", err)
	}
	return c, nil
}

type honestChild struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func (c *honestChild) phase(d time.Duration) (phaseJSON, error) {
	var p phaseJSON
	if _, err := fmt.Fprintln(c.in, int64(d)); err != nil {
		return p, err
	}
	line, err := c.out.ReadBytes('\n')
	if err != nil {
		return p, err
	}
	return p, json.Unmarshal(line, &p)
}

func (c *honestChild) run(_ context.Context, d time.Duration) *latencies {
	p, err := c.phase(d)
	l := &latencies{ops: p.Ops, failed: p.Failed, byOp: p.ByOp}
	if err != nil {
		l.ops, l.failed, l.firstErr = l.ops+1, l.failed+1, fmt.Errorf("honest clients: %w", err)
	} else if p.FirstErr != "" {
		l.firstErr = errors.New(p.FirstErr)
	}
	for _, ds := range p.ByOp {
		l.d = append(l.d, ds...)
	}
	return l
}

func (c *honestChild) close() {
	c.in.Close()
	done := make(chan struct{})
	go func() { c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		<-done
	}
}

// honestChildMain is the child: it connects n honest clients to addr,
// then for each line of standard input (a duration in nanoseconds) runs
// them that long and prints the phase's latencies as one JSON line.
func honestChildMain(addr string, n int) int {
	h, err := newHonest(addr, n)
	if err != nil {
		fmt.Fprintln(os.Stderr, "regroup-attack honest clients:", err)
		return 1
	}
	defer h.close()
	sc := bufio.NewScanner(os.Stdin)
	enc := json.NewEncoder(os.Stdout)
	for sc.Scan() {
		ns, err := strconv.ParseInt(sc.Text(), 10, 64)
		if err != nil {
			return 2
		}
		l := &latencies{}
		if ns > 0 {
			l = h.run(context.Background(), time.Duration(ns))
		}
		p := phaseJSON{Ops: l.ops, Failed: l.failed, ByOp: l.byOp}
		if l.firstErr != nil {
			p.FirstErr = l.firstErr.Error()
		}
		if err := enc.Encode(p); err != nil {
			return 1
		}
	}
	return 0
}
