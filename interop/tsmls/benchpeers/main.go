// Command benchpeers times regroup's MLS engine and ts-mls 1.6.4 on the
// same operations, in groups of 10, 100 and 1,000 members, suite 3, in
// one run, and prints the ratio per cell (`make bench-peers`):
//
//   - create: the creator builds an empty commit, which carries an
//     UpdatePath;
//   - process: another member processes that commit and moves to the new
//     epoch;
//   - join: a new member joins from a Welcome carrying the ratchet tree.
//
// Each side builds the group the same way — the creator adds everyone
// else in one commit without a path, and one member joins — and runs
// every operation on the same state each time, after one untimed run.
// regroup is timed twice: through ports.MLS (adapters/mls, its state in
// an in-memory store, each operation a transaction that is rolled back)
// and on package group in memory, as ts-mls keeps its state. ts-mls runs
// under Node (interop/tsmls/bench.mjs). The figure of each cell is the
// median of its runs; the ratio is ts-mls's time over regroup's.
//
// Usage: go run ./interop/tsmls/benchpeers [-sizes 10,100,1000] [-runs 15,7,3] [-cpuprofile file]
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/regroup-mls/regroup/interop/tsmls"
)

func main() {
	sizes := flag.String("sizes", "10,100,1000", "group sizes")
	runs := flag.String("runs", "15,7,3", "timed runs per operation, per size")
	profile := flag.String("cpuprofile", "", "write a CPU profile of regroup's side to this file")
	flag.Parse()
	if *profile != "" {
		f, err := os.Create(*profile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchpeers:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	ns, err := ints(*sizes)
	if err == nil {
		var rs []int
		if rs, err = ints(*runs); err == nil && len(rs) != len(ns) {
			err = errors.New("-runs needs one count per size")
		}
		if err == nil {
			err = run(ns, rs)
		}
	}
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "benchpeers:", err)
		os.Exit(1)
	}
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 2 {
			return nil, fmt.Errorf("bad number %q", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// ops are the three timed operations, in order.
var ops = []string{"create", "process", "join"}

func run(sizes, runs []int) error {
	dir := tsmls.Dir()
	if err := tsmls.Install(context.Background(), dir); err != nil {
		return err
	}
	fmt.Printf("regroup vs ts-mls 1.6.4, suite 3 — %s, GOMAXPROCS %d, %s\n", runtime.Version(), runtime.GOMAXPROCS(0), time.Now().UTC().Format(time.RFC3339))
	fmt.Printf("median ms per operation; ratio = ts-mls ÷ regroup (goal ≥ 2)\n\n")
	fmt.Printf("%-7s %-8s %10s %14s %7s %14s %7s\n", "members", "op", "ts-mls", "regroup port", "ratio", "regroup group", "ratio")
	for i, n := range sizes {
		port, err := portTimes(n, runs[i])
		if err != nil {
			return fmt.Errorf("regroup through the port, %d members: %w", n, err)
		}
		mem, err := groupTimes(n, runs[i])
		if err != nil {
			return fmt.Errorf("regroup in memory, %d members: %w", n, err)
		}
		peer, err := tsmlsTimes(dir, n, runs[i])
		if err != nil {
			return fmt.Errorf("ts-mls, %d members: %w", n, err)
		}
		for _, op := range ops {
			p, g, t := median(port[op]), median(mem[op]), median(peer[op])
			fmt.Printf("%-7d %-8s %10.2f %14.3f %7.1f %14.3f %7.1f\n", n, op, t, p, t/p, g, t/g)
		}
	}
	return nil
}

// tsmlsTimes runs bench.mjs for n members.
func tsmlsTimes(dir string, n, runs int) (map[string][]float64, error) {
	cmd := exec.Command("node", filepath.Join(dir, "bench.mjs"), strconv.Itoa(n), strconv.Itoa(runs))
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("node bench.mjs: %w\n%s", err, stderr.String())
	}
	var res map[string]json.RawMessage
	if err := json.Unmarshal(out, &res); err != nil {
		return nil, fmt.Errorf("node bench.mjs output: %w", err)
	}
	times := map[string][]float64{}
	for _, op := range ops {
		var ms []float64
		if err := json.Unmarshal(res[op], &ms); err != nil || len(ms) == 0 {
			return nil, fmt.Errorf("node bench.mjs output: no times for %s", op)
		}
		times[op] = ms
	}
	return times, nil
}

// timeRuns runs fn once untimed, then runs times, and returns the
// milliseconds of the timed runs.
func timeRuns(runs int, fn func() error) ([]float64, error) {
	if err := fn(); err != nil {
		return nil, err
	}
	out := make([]float64, 0, runs)
	for range runs {
		t0 := time.Now()
		if err := fn(); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t0).Seconds()*1e3)
	}
	return out, nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
