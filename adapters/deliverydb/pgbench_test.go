package deliverydb

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// pgBenchPublishers is how many concurrent publishers the PostgreSQL
// append benchmark runs: as many as regroup-load's, and as many writers
// as the raw reference's.
const pgBenchPublishers = 16

// BenchmarkAppendVsRawInsertPostgres runs, in one run on one database,
// pgBenchPublishers concurrent publishers each appending one 256-byte
// envelope per Append call over 8 topics, and the reference: single-row
// autocommit INSERTs of a 256-byte row into a plain table by as many
// concurrent writers, on connections with the server's own durability
// settings (fsync and synchronous_commit, printed with the figures). A
// third phase, "free", runs the same appends through a second store on
// the same schema whose writers do not take turns or gather (how they
// worked before). The phases alternate in ten
// rounds, so that the machine's load drifting during the run weighs on
// each alike. ratio is the append rate over the reference's; cpu-ratio
// is the reference's CPU per insert over the appends' CPU per envelope
// (this process and the database's backends, read from /proc on Linux),
// the rate ratio a machine whose cores are all busy would reach.
func BenchmarkAppendVsRawInsertPostgres(b *testing.B) {
	s := benchPG(b)
	ctx := context.Background()
	var fsync, syncCommit string
	if err := s.sqlDB.QueryRowContext(ctx, `SELECT current_setting('fsync'), current_setting('synchronous_commit')`).Scan(&fsync, &syncCommit); err != nil {
		b.Fatal(err)
	}
	if _, err := s.sqlDB.ExecContext(ctx, `CREATE TABLE raw_ref (id BIGSERIAL PRIMARY KEY, topic BYTEA NOT NULL, payload BYTEA NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	raw, err := sql.Open("pgx", s.dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	raw.SetMaxOpenConns(pgBenchPublishers)
	raw.SetMaxIdleConns(pgBenchPublishers)
	topics := benchTopics()
	payload := make([]byte, 256)
	insert := func(int64) error {
		_, err := raw.ExecContext(ctx, `INSERT INTO raw_ref (topic, payload) VALUES ($1, $2)`, topics[0], payload)
		return err
	}
	appendTo := func(st *Store) func(i int64) error {
		return func(i int64) error {
			_, err := st.Append(ctx, []ports.NewStoredEnvelope{{Topic: topics[i%int64(len(topics))], Envelope: payload, ServerTimestampNS: 1}})
			return err
		}
	}
	// The same appends, on the same schema, with writers that do not take
	// turns: each starts a group as soon as it is free.
	free, err := OpenPostgres(ctx, s.dsn, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer free.Close()
	free.group.freeTurns = true
	phases := []*benchPhase{{name: "raw", do: insert}, {name: "append", do: appendTo(s), store: s}, {name: "free", do: appendTo(free), store: free}}
	for _, p := range phases { // warm the pools
		p.run(b, s.sqlDB, 2*pgBenchPublishers)
	}
	for _, p := range phases {
		p.wall, p.cpu, p.self, p.n, p.groups, p.grouped = 0, 0, 0, 0, 0, 0
	}
	const rounds = 10
	per := max(b.N/rounds, 1)
	b.ResetTimer()
	for r := range rounds {
		for i := range phases {
			if r%2 == 1 {
				i = len(phases) - 1 - i
			}
			phases[i].run(b, s.sqlDB, per)
		}
	}
	b.StopTimer()
	rawP, appP := phases[0], phases[1]
	b.ReportMetric(appP.rate(), "appends/s")
	b.ReportMetric(rawP.rate(), "raw-inserts/s")
	b.ReportMetric(appP.rate()/rawP.rate(), "ratio")
	cpuKnown := appP.cpu > 0 && rawP.cpu > 0
	if cpuKnown {
		b.ReportMetric(rawP.cpuPer()/appP.cpuPer(), "cpu-ratio")
	}
	if b.N < 1000 {
		return
	}
	fmt.Printf("postgres fsync=%s synchronous_commit=%s, %d publishers, one 256-byte envelope per Append, %d each:\n", fsync, syncCommit, pgBenchPublishers, rounds*per)
	for _, p := range phases {
		line := fmt.Sprintf("  %-6s %6.0f /s  ratio %.2f", p.name, p.rate(), p.rate()/rawP.rate())
		if cpuKnown {
			line += fmt.Sprintf("  CPU %5.1f µs per envelope, %4.1f of them in this process (cpu-ratio %.2f)",
				p.cpuPer(), float64(p.self.Microseconds())/float64(p.n), rawP.cpuPer()/p.cpuPer())
		}
		if p.groups > 0 {
			line += fmt.Sprintf("  %.1f appends per group", float64(p.grouped)/float64(p.groups))
		}
		fmt.Println(line)
	}
}

// benchPhase is one phase of BenchmarkAppendVsRawInsertPostgres: what
// each of its calls does and what its rounds took.
type benchPhase struct {
	name string
	do   func(i int64) error
	// store is the phase's store, whose groups it counts; nil for raw.
	store           *Store
	groups, grouped int64
	wall            time.Duration
	cpu             time.Duration // this process and the database's backends; 0 when unknown
	self            time.Duration // this process alone
	n               int
}

// run makes n calls of p.do by pgBenchPublishers goroutines and adds
// their time to p.
func (p *benchPhase) run(b *testing.B, db *sql.DB, n int) {
	cpu0, ok0 := benchCPU(db)
	if p.store != nil {
		g0, a0 := p.store.group.groups.Load(), p.store.group.grouped.Load()
		defer func() {
			p.groups += p.store.group.groups.Load() - g0
			p.grouped += p.store.group.grouped.Load() - a0
		}()
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range pgBenchPublishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				if err := p.do(i); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	p.wall += time.Since(start)
	p.n += n
	if cpu1, ok1 := benchCPU(db); ok0 && ok1 {
		var d time.Duration
		for pid, t := range cpu1 {
			d += t - cpu0[pid]
		}
		p.cpu += d
		p.self += cpu1[0] - cpu0[0]
	}
}

func (p *benchPhase) rate() float64 { return float64(p.n) / p.wall.Seconds() }

// cpuPer is the CPU in µs per call.
func (p *benchPhase) cpuPer() float64 { return float64(p.cpu.Microseconds()) / float64(p.n) }

// benchCPU reads the CPU time used so far by this process (key 0) and by
// each client backend of db's database (key: its pid), from /proc. It
// reports false where that cannot be read.
func benchCPU(db *sql.DB) (map[int]time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return nil, false
	}
	out := map[int]time.Duration{0: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
	rows, err := db.Query(`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'`)
	if err != nil {
		return nil, false
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			return nil, false
		}
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return nil, false
		}
		// Fields 14 and 15 (utime, stime, in clock ticks of 10 ms) follow
		// the command in parentheses.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) < 13 {
			return nil, false
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		out[pid] = time.Duration(ut+st) * 10 * time.Millisecond
	}
	return out, rows.Err() == nil
}
