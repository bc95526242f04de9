package main

import (
	"bufio"
	"context"
	"database/sql"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/glebarez/go-sqlite" // the "sqlite" driver
	"github.com/jackc/pgx/v5"

	"github.com/regroup-mls/regroup/internal/lockfile"
	"github.com/regroup-mls/regroup/internal/testenv"
)

// COMP-348: replicas started together on a fresh PostgreSQL database take
// turns creating the schema and its first table, so every one of them
// starts. The test makes the race certain instead of likely: it creates
// the object the replicas are about to create in a transaction of its
// own and keeps it open until every replica waits behind it (on that
// transaction, or on the schema lock), then rolls it back, so all of
// them reach CREATE … IF NOT EXISTS at the same instant. Without the
// schema lock all but one then fail with a duplicate key and exit.
func TestCOMP348_ReplicasTakeTurnsOnAFreshSchema(t *testing.T) {
	dsn := testenv.PostgresDSN(t)
	bin := testenv.RegroupdBinary(t)
	for _, tc := range []struct {
		name string
		// hold is the statement the test's open transaction runs: the
		// object a replica creates first, left uncommitted.
		hold func(schema string) []string
	}{
		{"schema", func(schema string) []string {
			return []string{`CREATE SCHEMA "` + schema + `"`}
		}},
		{"first table", func(schema string) []string {
			return []string{`CREATE TABLE "` + schema + `".delivery_schema_version (version INTEGER NOT NULL)`}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			schema := testenv.FreshSchema(t, dsn)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			if tc.name != "schema" {
				if _, err := conn.Exec(ctx, `CREATE SCHEMA "`+schema+`"`); err != nil {
					t.Fatal(err)
				}
			}
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.hold(schema) {
				if _, err := tx.Exec(ctx, s); err != nil {
					t.Fatal(err)
				}
			}
			const n = 4
			done := make(chan string, n)
			for range n {
				startReplica(t, bin, []string{"-database", dsn, "-postgres-schema", schema}, done)
			}
			waitForLockWaiters(ctx, t, dsn, n)
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			for range n {
				if e := <-done; e != "" {
					t.Error(e)
				}
			}
		})
	}
}

// COMP-348 on SQLite: replicas started together on one fresh SQLite file
// take turns (a lock file beside it), so every one starts. A connection
// switching the file to WAL upgrades its read transaction to a write one,
// and SQLite refuses that upgrade at once ("database is locked", without
// waiting its busy timeout) while another connection writes. The test
// plays a replica in the middle of its turn: it holds the turn and a
// write lock on the file while the replicas start, then lets go of both.
// Without the turns every replica meets the write lock and exits.
func TestCOMP348_ReplicasTakeTurnsOnAFreshSQLiteFile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bin := testenv.RegroupdBinary(t)
	path := filepath.Join(t.TempDir(), "regroupd.db")
	turn, err := lockfile.Acquire(path + ".lock")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	const n = 4
	done := make(chan string, n)
	for range n {
		startReplica(t, bin, []string{"-database", path}, done)
	}
	time.Sleep(time.Second) // the replicas reach their turn; a slower start only weakens the test
	if _, err := conn.ExecContext(ctx, `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()
	_ = db.Close()
	_ = turn.Release()
	for range n {
		if e := <-done; e != "" {
			t.Error(e)
		}
	}
}

// startReplica starts regroupd with args and reports on done "" once it
// listens, or its log when it exits first. The process is killed when
// the test ends.
func startReplica(t *testing.T, bin string, args []string, done chan<- string) {
	t.Helper()
	cmd := exec.Command(bin, append(args, "-listen", "127.0.0.1:0", "-health-listen", "")...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	go func() {
		sc := bufio.NewScanner(stderr)
		var log []string
		for sc.Scan() {
			log = append(log, sc.Text())
			if strings.Contains(sc.Text(), `"msg":"regroupd listening"`) {
				done <- ""
				for sc.Scan() { // drain, so the process never blocks on its log
				}
				return
			}
		}
		done <- "exited before listening: " + strings.Join(log, "\n")
	}()
}

// waitForLockWaiters waits until n sessions of the database of dsn wait
// on a lock.
func waitForLockWaiters(ctx context.Context, t *testing.T, dsn string, n int) {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for {
		var waiting int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d replicas wait behind the test's transaction", waiting, n)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
