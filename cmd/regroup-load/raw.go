package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/glebarez/go-sqlite"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// rawInsertRate is the reference figure: single-row autocommit INSERTs of
// a payload-sized row into a plain table, by p.publishers concurrent
// writers, on the same database with the durability settings regroupd
// uses (SQLite: WAL, synchronous=FULL).
// rawRate is one measurement of the reference.
type rawRate struct {
	rate         float64 // rows per second
	cpuPerInsert float64 // the load generator's CPU µs per insert
}

func rawInsertRate(ctx context.Context, dialect, database, schema string, p params) (rawRate, error) {
	var db *sql.DB
	var err error
	table := "raw_inserts"
	create := `CREATE TABLE raw_inserts (id INTEGER PRIMARY KEY, topic BLOB NOT NULL, payload BLOB NOT NULL)`
	insert := `INSERT INTO raw_inserts (topic, payload) VALUES (?, ?)`
	if dialect == "sqlite" {
		db, err = sql.Open("sqlite", "file:"+database+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	} else {
		db, err = sql.Open("pgx", database)
		table = `"` + schema + `".raw_inserts`
		create = `CREATE TABLE ` + table + ` (id BIGSERIAL PRIMARY KEY, topic BYTEA NOT NULL, payload BYTEA NOT NULL)`
		insert = `INSERT INTO ` + table + ` (topic, payload) VALUES ($1, $2)`
		if err == nil {
			_, err = db.ExecContext(ctx, `CREATE SCHEMA IF NOT EXISTS "`+schema+`"`)
		}
	}
	if err != nil {
		return rawRate{}, err
	}
	defer db.Close()
	db.SetMaxOpenConns(p.publishers)
	if _, err := db.ExecContext(ctx, create); err != nil {
		return rawRate{}, fmt.Errorf("create raw table: %w", err)
	}
	payload := make([]byte, p.payload)
	_, _ = rand.Read(payload)
	topic := make([]byte, 33)
	d := max(p.duration/3, 2*time.Second)
	deadline := time.Now().Add(d)
	var n atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, p.publishers)
	start, cpu0 := time.Now(), cpuTime()
	for w := 0; w < p.publishers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if _, err := db.ExecContext(ctx, insert, topic, payload); err != nil {
					errs <- err
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return rawRate{}, fmt.Errorf("raw insert: %w", err)
	}
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	return rawRate{rate: float64(n.Load()) / elapsed.Seconds(), cpuPerInsert: float64(cpu.Microseconds()) / float64(max(n.Load(), 1))}, nil
}
