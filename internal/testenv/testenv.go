// Package testenv starts what regroup's end-to-end tests run against: a
// real regroupd process built from this module, on a SQLite file or a
// fresh PostgreSQL schema, and PostgreSQL schemas for client stores; and
// backs up and puts back a regroupd's database as docs/operations.md
// says ([BackupKit]).
//
// PostgreSQL comes from REGROUP_POSTGRES_DSN: without it the PostgreSQL
// cases skip, and with CI=true they fail instead, so CI never passes by
// skipping them.
package testenv

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Databases are the two databases every end-to-end case runs on.
var Databases = []string{"sqlite", "postgres"}

// PostgresDSN returns REGROUP_POSTGRES_DSN, skipping the test when it is
// unset (failing it when CI=true).
func PostgresDSN(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv("REGROUP_POSTGRES_DSN")
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			tb.Fatal("REGROUP_POSTGRES_DSN is unset and CI=true: the PostgreSQL cases must run in CI")
		}
		tb.Skip("REGROUP_POSTGRES_DSN unset: set it to a PostgreSQL DSN to run the PostgreSQL cases")
	}
	return dsn
}

// FreshSchema returns a new schema name, dropped from the database of dsn
// when the test ends.
func FreshSchema(tb testing.TB, dsn string) string {
	tb.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "t_" + hex.EncodeToString(b)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, `DROP SCHEMA IF EXISTS "`+name+`" CASCADE`)
	})
	return name
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// RegroupdBinary builds cmd/regroupd once per test binary and returns its
// path.
func RegroupdBinary(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "regroupd-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "regroupd")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/regroup-mls/regroup/cmd/regroupd").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build regroupd: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return binPath
}

// Regroupd is a regroupd process a test started.
type Regroupd struct {
	tb     testing.TB
	args   []string
	cmd    *exec.Cmd
	exited chan error
	// Addr is the gRPC address it listens on, on 127.0.0.1.
	Addr string
}

// StartRegroupd starts a regroupd on 127.0.0.1 over db ("sqlite": a file
// in a temporary directory; "postgres": a fresh schema) and stops it when
// the test ends.
func StartRegroupd(tb testing.TB, db string) *Regroupd {
	tb.Helper()
	return StartRegroupdWith(tb, db)
}

// StartRegroupdWith is [StartRegroupd] with extra flags (for example
// -tls-cert and -tls-key).
func StartRegroupdWith(tb testing.TB, db string, extra ...string) *Regroupd {
	tb.Helper()
	args := []string{"-listen", "127.0.0.1:0", "-health-listen", ""}
	switch db {
	case "sqlite":
		args = append(args, "-database", filepath.Join(tb.TempDir(), "regroupd.db"))
	case "postgres":
		dsn := PostgresDSN(tb)
		args = append(args, "-database", dsn, "-postgres-schema", FreshSchema(tb, dsn))
	default:
		tb.Fatalf("unknown database %q", db)
	}
	args = append(args, extra...)
	r := &Regroupd{tb: tb, args: args}
	r.start()
	r.args[1] = r.Addr // a restart comes back on the same port
	tb.Cleanup(r.Kill)
	return r
}

func (r *Regroupd) start() {
	r.tb.Helper()
	cmd := exec.Command(RegroupdBinary(r.tb), append(r.args, "-log-level", "info")...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		r.tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		r.tb.Fatal(err)
	}
	r.cmd, r.exited = cmd, make(chan error, 1)
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "regroupd listening" {
				addr, _ := line["grpc_addr"].(string)
				ready <- addr
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() { r.exited <- cmd.Wait() }()
	select {
	case r.Addr = <-ready:
	case err := <-r.exited:
		r.tb.Fatalf("regroupd exited before listening: %v", err)
	case <-time.After(60 * time.Second):
		r.tb.Fatal("regroupd did not start listening within 60s")
	}
}

// Kill stops the process with SIGKILL and waits for it.
func (r *Regroupd) Kill() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.exited
	r.cmd = nil
}

// Start starts the process again after [Regroupd.Kill], on the same
// address and database (a test changes the database in between, as an
// operator restoring a backup does).
func (r *Regroupd) Start() {
	r.tb.Helper()
	if r.cmd != nil {
		r.tb.Fatal("regroupd is running: Kill it first")
	}
	r.start()
}

// Restart kills the process and starts it again on the same address and
// database.
func (r *Regroupd) Restart() {
	r.tb.Helper()
	r.Kill()
	r.start()
}

// Flag returns the value regroupd was started with for the flag name
// (without its dash), "" when not given: "database" is the SQLite file or
// the PostgreSQL DSN, "postgres-schema" the schema.
func (r *Regroupd) Flag(name string) string {
	for i := 0; i+1 < len(r.args); i++ {
		if r.args[i] == "-"+name {
			return r.args[i+1]
		}
	}
	return ""
}
