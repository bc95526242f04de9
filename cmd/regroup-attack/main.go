// Command regroup-attack runs bounded, self-stopping attacks against a
// regroupd it starts on 127.0.0.1, on SQLite and on PostgreSQL (when
// REGROUP_POSTGRES_DSN is set), and checks that the server's memory, CPU
// and answers stay within stated bounds. Each attack reproduces one way a
// single cheap client could exhaust or mislead the server:
//
//  1. slow-subscribers: subscriptions that never read a topic of large
//     envelopes; peak RSS growth is bounded and an honest reader still
//     reads everything.
//  2. parallel-queries: parallel queries of the largest page on a topic
//     of large envelopes; peak RSS growth is bounded.
//  3. cancelled-publishers: publishers whose deadlines end mid-commit; a
//     subscriber reaches the highest stored id with no further publish.
//  4. cpu-amplification: subscribers of 1,024 topics receiving publishes
//     to one; the server's CPU is within 3× of subscribers of that topic
//     alone.
//  5. cursor-wrap: a cursor of 2^64-1 is refused.
//  6. database-outage: with PostgreSQL cut off, a client learns nothing
//     about the database.
//  7. bad-protobuf: an undecodable request is InvalidArgument.
//  8. commit-log-replay: one entry published 500 times is stored once.
//  9. one-identity: one key over 40 connections gets at most 32
//     subscriptions.
//
// Then the fair-share run (fair.go): regroupd with its default limits,
// honest clients on [::1] beside adversaries on 127.0.0.1 — subscribers
// that never read, zero-window HTTP/2 connections, connection and
// subscription hoarding, QueryNewest floods, identity-update replays,
// Welcome storage floods — each alone and all at once (only all at once
// in the short run). Per adversary it prints the server's peak RSS
// against the read budget plus a per-connection allowance, and the honest
// clients' p50/p99 against the same server before the adversary started;
// it fails when an honest call fails, the RSS passes its bound or the
// honest p99 passes 3× the unloaded one.
//
// Each attack starts its own regroupd (settings as REGROUPD_* variables,
// which an older regroupd ignores, so the same run shows what an older
// build does). It exits non-zero when a bound is exceeded.
//
//	regroup-attack -regroupd ./bin/regroupd [-long] [-only slow-subscribers,...,fair-share]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// outcome is one attack's result.
type outcome struct {
	finding  int
	name     string
	measured string
	bound    string
	err      error
}

func (o outcome) fail(err error) outcome {
	o.err = err
	return o
}

type attack func(ctx context.Context, tg target, sz sizes) outcome

var attacks = []struct {
	name string
	run  attack
}{
	{"slow-subscribers", slowSubscribers},
	{"parallel-queries", parallelQueries},
	{"cancelled-publishers", cancelledPublishers},
	{"cpu-amplification", cpuAmplification},
	{"cursor-wrap", cursorWrap},
	{"database-outage", dbOutage},
	{"bad-protobuf", badProtobuf},
	{"commit-log-replay", replay},
	{"one-identity", oneIdentity},
}

// settings are the regroupd settings every attack of this list runs
// with: the defaults, but a slow-reader timeout that fits a short run,
// and without the per-address limits and storage quotas, which would
// refuse these single-client attacks before they reach the bound each
// measures (the fair-share run, fair.go, measures those limits).
func settings(sz sizes) map[string]string {
	return map[string]string{"REGROUPD_SLOW_READER_TIMEOUT": (sz.watch / 3).String(),
		"REGROUPD_MAX_CONNECTIONS_PER_ADDRESS": "-1", "REGROUPD_MAX_SUBSCRIPTIONS_PER_ADDRESS": "-1",
		"REGROUPD_MAX_CURSORS_PER_ADDRESS": "-1", "REGROUPD_ANONYMOUS_SUBSCRIPTIONS_PER_ADDRESS": "-1",
		"REGROUPD_ANONYMOUS_CURSORS_PER_ADDRESS": "-1", "REGROUPD_ADDRESS_RATE": "-1",
		"REGROUPD_QUOTA_WELCOMES_MIB": "0", "REGROUPD_QUOTA_GROUP_MESSAGES_MIB": "0", "REGROUPD_SIGNATURE_COST": "-1"}
}

// runAll runs the attacks named in only (all when empty) against bin on
// each database and returns their outcomes.
func runAll(ctx context.Context, bin, dir string, dbs []string, sz sizes, only map[string]bool, report func(db string, o outcome)) []outcome {
	var out []outcome
	for _, db := range dbs {
		tg := target{bin: bin, db: db, dsn: os.Getenv("REGROUP_POSTGRES_DSN"), dir: dir, settings: settings(sz)}
		for _, a := range attacks {
			if len(only) > 0 && !only[a.name] {
				continue
			}
			actx, cancel := context.WithTimeout(ctx, 3*time.Minute)
			o := a.run(actx, tg, sz)
			cancel()
			report(db, o)
			out = append(out, o)
		}
	}
	return out
}

func main() {
	if len(os.Args) == 4 && os.Args[1] == honestChildFlag {
		n, _ := strconv.Atoi(os.Args[3])
		os.Exit(honestChildMain(os.Args[2], n))
	}
	if exe, err := os.Executable(); err == nil {
		honestExe = exe
	}
	bin := flag.String("regroupd", "./bin/regroupd", "path of the regroupd binary to attack")
	longRun := flag.Bool("long", false, "larger envelopes, more clients and longer watches")
	onlyList := flag.String("only", "", "comma-separated attack names (default: all)")
	rows := flag.String("fair", "", "comma-separated rows of the fair-share run: adversary names, all (default: every row)")
	rounds := flag.Int("rounds", 0, "unloaded and attacked phases per fair-share row (default: 1, or 5 with -long)")
	dbList := flag.String("db", "", "comma-separated databases to attack: sqlite, postgres (default: both, postgres with REGROUP_POSTGRES_DSN)")
	pprofAddr := flag.String("pprof", "", "serve the fair-share regroupd's Go profiles on this health `ADDR`ess (one row at a time), to see where honest latency goes")
	requirePG := flag.Bool("require-postgres", os.Getenv("CI") == "true", "fail when REGROUP_POSTGRES_DSN is unset")
	flag.Parse()
	if _, err := os.Stat(*bin); err != nil {
		fmt.Fprintf(os.Stderr, "regroup-attack: regroupd binary: %v (go build -o %s ./cmd/regroupd)\n", err, *bin)
		os.Exit(2)
	}
	dbs := []string{"sqlite"}
	if os.Getenv("REGROUP_POSTGRES_DSN") != "" {
		dbs = append(dbs, "postgres")
	} else if *requirePG {
		fmt.Fprintln(os.Stderr, "regroup-attack: REGROUP_POSTGRES_DSN is unset and PostgreSQL is required")
		os.Exit(1)
	}
	if *dbList != "" {
		var keep []string
		for _, db := range dbs {
			if strings.Contains(","+*dbList+",", ","+db+",") {
				keep = append(keep, db)
			}
		}
		dbs = keep
	}
	sz := short
	if *longRun {
		sz = long
	}
	only := map[string]bool{}
	for _, n := range strings.Split(*onlyList, ",") {
		if n = strings.TrimSpace(n); n != "" {
			only[n] = true
		}
	}
	dir, err := os.MkdirTemp("", "regroup-attack-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "regroup-attack:", err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	failed := false
	runAll(context.Background(), *bin, dir, dbs, sz, only, func(db string, o outcome) {
		verdict := "ok"
		if o.err != nil {
			verdict, failed = "FAILED: "+o.err.Error(), true
		}
		fmt.Printf("%-8s %d %-21s %s\n         bound: %s — %s\n", db, o.finding, o.name, o.measured, o.bound, verdict)
	})
	if len(only) == 0 || only["fair-share"] {
		fsz := fairShort
		if *longRun {
			fsz = fairLong
		}
		if *rounds > 0 {
			fsz.rounds = *rounds
		}
		fairOnly := map[string]bool{}
		for _, n := range strings.Split(*rows, ",") {
			if n != "" {
				fairOnly[n] = true
			}
		}
		for _, db := range dbs {
			tg := target{bin: *bin, db: db, dsn: os.Getenv("REGROUP_POSTGRES_DSN"), dir: dir, pprof: *pprofAddr}
			for _, r := range runFair(context.Background(), tg, fsz, *longRun, fairOnly, printFair) {
				failed = failed || !r.ok()
			}
		}
	}
	if failed {
		os.RemoveAll(dir)
		os.Exit(1)
	}
}
