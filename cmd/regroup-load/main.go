// Command regroup-load measures and checks regroupd under load, on SQLite
// and on PostgreSQL (when REGROUP_POSTGRES_DSN is set):
//
//   - steady run: N concurrent publishers over M topics on loopback for a
//     fixed time while a subscribed reader follows every topic; afterwards
//     each topic must hold exactly the acknowledged envelopes at their
//     ids, ascending, and the reader must have received exactly those ids
//     of each topic in order (ids come from one counter shared by all
//     topics, so a topic's ids have gaps; what is checked is that nothing
//     is missed, duplicated or reordered); it prints throughput and
//     p50/p99 publish latency;
//
//   - fault run: the same load while regroupd is killed with SIGKILL and
//     restarted; afterwards every acknowledged envelope must be present
//     with the id it was acknowledged with, and the reader must have
//     received exactly what each topic holds;
//
//   - raw insert rate: single-row INSERTs into a plain table of the same
//     database by the same number of writers, the reference the
//     throughput is read against;
//
//   - replica runs (on PostgreSQL, with -replicas N): N regroupd processes
//     share the database with -postgres-notify; every publisher spreads
//     its calls over all of them (grpctransport.DialReplicas), one reader
//     subscribes to each, and every reader must receive exactly what each
//     topic holds, in order; then the same with one process SIGKILLed and
//     restarted halfway. The throughput of N processes is printed against
//     the steady run's one.
//
//   - fan-out run (with -fanout N): one big group message (-fanout-bytes,
//     320 KiB by default: a commit of a large group) published to a topic
//     that N subscription streams follow, spread over -fanout-conns
//     connections, each authenticated as its own installation; the time
//     from the publish call to the last stream's receipt, per round,
//     against a reference server in its own process that only writes the
//     same bytes to as many streams over as many connections, alternating
//     round by round, and regroupd's peak RSS, Go heap and read budget in
//     use against the memory budget it logged at start-up (COMP-337).
//
// During each steady run it scrapes every process's /metrics and prints
// the figures beside its own (publishes against acknowledgements,
// latency and lag histograms), so the two can be checked against each
// other.
//
// It exits non-zero when any check fails.
//
//	regroup-load -regroupd ./bin/regroupd [-publishers 16] [-topics 8] [-duration 10s] [-replicas 3] [-fanout 10000 [-fanout-only]]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/regroup-mls/regroup/adapters/deliverydb"
)

type params struct {
	bin        string
	publishers int
	topics     int
	duration   time.Duration
	payload    int
	// profileDir, when set, receives a CPU profile of regroupd during
	// each steady run.
	profileDir string
	// batch is the number of envelopes per Publish call.
	batch int
	// replicas, when above 1, adds on PostgreSQL the replica runs: that
	// many regroupd processes sharing the database.
	replicas int
	// fanout, when set, adds the fan-out run per database (fanout.go);
	// fanoutOnly skips the others.
	fanout     fanoutParams
	fanoutOnly bool
}

func main() {
	var p params
	var requirePG bool
	var only string
	flag.StringVar(&p.bin, "regroupd", "./bin/regroupd", "path of the regroupd binary to run")
	flag.IntVar(&p.publishers, "publishers", 16, "concurrent publishers (one connection each)")
	flag.IntVar(&p.topics, "topics", 8, "group-message topics the publishers spread over")
	flag.DurationVar(&p.duration, "duration", 10*time.Second, "length of each timed run")
	flag.IntVar(&p.payload, "payload", 256, "bytes per envelope payload")
	flag.StringVar(&p.profileDir, "profile", "", "directory for CPU profiles of regroupd during the steady runs (regroupd -pprof)")
	flag.IntVar(&p.batch, "batch", 1, "envelopes per publish call (the acknowledged count and the rate are in envelopes; latency is per call)")
	flag.IntVar(&p.replicas, "replicas", 0, "on PostgreSQL, also run this many regroupd replicas sharing the database (steady, and with one SIGKILLed); 0 or 1 skips")
	flag.IntVar(&p.fanout.subs, "fanout", 0, "also run the fan-out: this many subscription streams follow one topic, each receiving one big group message per round; 0 skips")
	flag.IntVar(&p.fanout.conns, "fanout-conns", 320, "connections the fan-out's streams spread over, each its own installation (at most 32 streams each under regroupd's default caps)")
	flag.IntVar(&p.fanout.bytes, "fanout-bytes", 320<<10, "payload bytes of the fan-out's group message (a commit of a large group)")
	flag.IntVar(&p.fanout.rounds, "fanout-rounds", 5, "timed fan-out rounds per server, after one untimed")
	flag.BoolVar(&p.fanoutOnly, "fanout-only", false, "run only the fan-out")
	rawMode := flag.Bool("raw-server", false, "internal: serve as the fan-out's raw-write reference")
	flag.StringVar(&only, "databases", "sqlite,postgres", "the databases to run, comma-separated")
	flag.BoolVar(&requirePG, "require-postgres", os.Getenv("CI") == "true", "fail when REGROUP_POSTGRES_DSN is unset")
	flag.Parse()
	if *rawMode {
		if err := serveRaw(); err != nil {
			fmt.Fprintln(os.Stderr, "regroup-load -raw-server:", err)
			os.Exit(1)
		}
		return
	}
	if _, err := os.Stat(p.bin); err != nil {
		fmt.Fprintf(os.Stderr, "regroup-load: regroupd binary: %v (build it with go build -o %s ./cmd/regroupd)\n", err, p.bin)
		os.Exit(2)
	}
	dir, err := os.MkdirTemp("", "regroup-load-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "regroup-load:", err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)

	type db struct {
		name, database string
	}
	var dbs []db
	if strings.Contains(only, "sqlite") {
		dbs = append(dbs, db{name: "sqlite", database: filepath.Join(dir, "steady.db")})
	}
	if !strings.Contains(only, "postgres") {
		// not asked for
	} else if dsn := os.Getenv("REGROUP_POSTGRES_DSN"); dsn != "" {
		dbs = append(dbs, db{name: "postgres", database: dsn})
	} else if requirePG {
		fmt.Fprintln(os.Stderr, "regroup-load: REGROUP_POSTGRES_DSN is unset and PostgreSQL is required")
		os.Exit(1)
	} else {
		fmt.Println("postgres: skipped (REGROUP_POSTGRES_DSN unset)")
	}
	if p.fanout.subs > 0 && (p.fanout.conns <= 0 || p.fanout.conns > p.fanout.subs || p.fanout.bytes < 8 || p.fanout.rounds < 1) {
		fmt.Fprintln(os.Stderr, "regroup-load: -fanout needs 1 <= -fanout-conns <= -fanout, -fanout-bytes >= 8 and -fanout-rounds >= 1")
		os.Exit(2)
	}
	if !p.fanoutOnly {
		fmt.Printf("regroup-load: %d publishers, %d topics, %s per run, %d-byte payloads, %d per publish, loopback gRPC\n\n",
			p.publishers, p.topics, p.duration, p.payload, max(p.batch, 1))
		fmt.Printf("%-9s %-15s %5s %9s %11s %9s %9s %12s %7s  %s\n", "database", "run", "procs", "acked", "envelopes/s", "p50", "p99", "raw rows/s", "ratio", "checks")
	}
	failed := false
	for _, d := range dbs {
		ctx := context.Background()
		fresh := func(file string) (string, string, func()) {
			if d.name == "sqlite" {
				return filepath.Join(dir, file), "", func() {}
			}
			schema := deliverydb.FreshSchemaName()
			return d.database, schema, func() {
				if s, err := deliverydb.OpenPostgres(ctx, d.database, &deliverydb.Options{Schema: schema}); err == nil {
					s.DropSchema(ctx)
					s.Close()
				}
			}
		}
		if p.fanout.subs > 0 {
			database, schema, drop := fresh("fanout.db")
			err := runFanout(ctx, p, p.fanout, d.name, database, schema)
			drop()
			if err != nil {
				fmt.Printf("%-9s fan-out FAILED: %v\n", d.name, err)
				failed = true
			}
			if p.fanoutOnly {
				continue
			}
		}
		// The reference is measured before and after the database's runs,
		// and their mean is what each run is read against: the machine's
		// load drifts over the minutes a database's runs take.
		measureRaw := func(file string) (rawRate, error) {
			rawDB, rawSchema, dropRaw := fresh(file)
			defer dropRaw()
			return rawInsertRate(ctx, d.name, rawDB, rawSchema, p)
		}
		before, err := measureRaw("raw-before.db")
		if err != nil {
			fmt.Printf("%-9s raw insert failed: %v\n", d.name, err)
			failed = true
			continue
		}
		type line struct {
			rn  run
			res result
		}
		var lines []line
		runs := []run{{name: "steady", replicas: 1}, {name: "fault", replicas: 1, fault: true}}
		if d.name == "postgres" && p.replicas > 1 {
			runs = append(runs, run{name: "replicas", replicas: p.replicas}, run{name: "replicas-fault", replicas: p.replicas, fault: true})
		}
		rates := map[string]float64{}
		for _, rn := range runs {
			database, schema, drop := fresh(rn.name + ".db")
			res, err := runLoad(ctx, p, database, schema, rn)
			drop()
			if err != nil {
				fmt.Printf("%-9s %-15s %5d FAILED: %v\n", d.name, rn.name, rn.replicas, err)
				failed = true
				continue
			}
			lines = append(lines, line{rn, res})
		}
		after, err := measureRaw("raw-after.db")
		if err != nil {
			fmt.Printf("%-9s raw insert failed: %v\n", d.name, err)
			failed = true
			continue
		}
		raw := (before.rate + after.rate) / 2
		fmt.Printf("%-9s raw inserts: %.0f rows/s before the runs, %.0f after, mean %.0f; load generator %.0fµs CPU per insert\n",
			d.name, before.rate, after.rate, raw, (before.cpuPerInsert+after.cpuPerInsert)/2)
		for _, l := range lines {
			rate := float64(l.res.acked) / l.res.elapsed.Seconds()
			rates[l.rn.name] = rate
			fmt.Printf("%-9s %-15s %5d %9d %11.0f %9s %9s %12.0f %7.2f  %s\n", d.name, l.rn.name, l.rn.replicas, l.res.acked,
				rate, l.res.p50.Round(10*time.Microsecond), l.res.p99.Round(10*time.Microsecond), raw, rate/raw, l.res.summary)
			if l.res.metrics != nil {
				fmt.Printf("%-9s %-15s %5s  %s\n", "", "", "", l.res.metrics.summary(l.res.acked, l.res.loadCPU))
			}
		}
		if one, n := rates["steady"], rates["replicas"]; one > 0 && n > 0 {
			fmt.Printf("%-9s %d replicas against 1: %.0f against %.0f envelopes/s, %.2f×\n", d.name, p.replicas, n, one, n/one)
		}
	}
	if failed {
		os.Exit(1)
	}
}
