package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/regroup-mls/regroup/internal/testenv"
)

// A regroupd that runs but whose database cannot serve (its schema is
// gone) is reported as such — up, database down — not as "not
// reachable"; once the database is back the same command works.
func TestCLIDatabaseDownIsNotUnreachable(t *testing.T) {
	if testing.Short() {
		t.Skip("runs regroupd and the regroup binary")
	}
	dsn := testenv.PostgresDSN(t)
	schema := testenv.FreshSchema(t, dsn)
	d := testenv.StartRegroupdWith(t, "postgres", "-postgres-schema", schema)
	bin := cliBinary(t)
	alice := user{t, bin, filepath.Join(t.TempDir(), "alice")}
	alice.ok("init", "--server", d.Addr)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `ALTER SCHEMA "`+schema+`" RENAME TO "`+schema+`_away"`); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := alice.run("group", "list", "--timeout", "3s")
	if _, err := conn.Exec(ctx, `ALTER SCHEMA "`+schema+`_away" RENAME TO "`+schema+`"`); err != nil {
		t.Fatal(err)
	}
	if code != exitUnavailable || !strings.Contains(errOut, "answered but could not serve the call, most likely because its database is down") ||
		strings.Contains(errOut, "not reachable") {
		t.Fatalf("group list with the database down: exit %d, %q", code, errOut)
	}
	alice.ok("group", "list")
}
