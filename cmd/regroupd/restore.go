package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/regroup-mls/regroup/adapters/deliverydb"
	"github.com/regroup-mls/regroup/core/delivery"
)

// restoreUsage is the restore subcommand's help.
const restoreUsage = `usage: regroupd restore [-database FILE|DSN] [-postgres-schema S] [-sequence-gap N] [-at-least ID]

Prepares a database put back from a backup for service, with every regroupd
on it stopped: moves the sequence-id counter past every id handed out before
(by -sequence-gap above the highest id the database or -at-least knows of),
deletes every stored key package, expires every pending commit (an EXPIRED
notice on its group's topic) and puts every group with a public state in
catch-up. Run it once after each restore, before starting regroupd again.
docs/operations.md, "Backup and restore", is the procedure.
`

// restoreCommand is `regroupd restore` with its arguments; it returns
// the process's exit code.
func restoreCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("regroupd restore", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	defDB, _ := defaultDatabase()
	var cfg config
	fs.StringVar(&cfg.Database, "database", envOr("REGROUPD_DATABASE", defDB), "SQLite file path, or a PostgreSQL DSN (env REGROUPD_DATABASE)")
	fs.StringVar(&cfg.PostgresSchema, "postgres-schema", envOr("REGROUPD_POSTGRES_SCHEMA", ""), "PostgreSQL schema of the tables (env REGROUPD_POSTGRES_SCHEMA)")
	gap := fs.String("sequence-gap", strconv.FormatUint(deliverydb.DefaultSequenceGap, 10), "ids left unused above the highest id known")
	atLeast := fs.String("at-least", "0", "an id known to have been handed out, when above the database's")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, restoreUsage)
			return 0
		}
		fmt.Fprintf(stderr, "regroupd restore: %v\n%s", err, restoreUsage)
		return 2
	}
	o := deliverydb.RestoreOptions{ExpiredNotice: delivery.ExpiredNotice}
	var err error
	if o.SequenceGap, err = strconv.ParseUint(*gap, 10, 64); err != nil || o.SequenceGap == 0 {
		fmt.Fprintf(stderr, "regroupd restore: -sequence-gap %q is not a positive integer\n", *gap)
		return 2
	}
	if o.AtLeast, err = strconv.ParseUint(*atLeast, 10, 64); err != nil {
		fmt.Fprintf(stderr, "regroupd restore: -at-least %q is not an integer\n", *atLeast)
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "regroupd restore: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if !cfg.postgres() {
		// A missing file would be created empty: restoring nothing is a
		// mistaken path, not a restore.
		if _, err := os.Stat(cfg.Database); err != nil {
			fmt.Fprintf(stderr, "regroupd restore: database %s: %v\n", cfg.Database, err)
			return 1
		}
	}
	cfg.PostgresWriters, cfg.PostgresConns = 1, 2
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	store, err := openStore(ctx, cfg, deliverydb.Hooks{})
	if err != nil {
		log.Error("restore failed", "err", fmt.Errorf("open database: %w", err))
		return 1
	}
	defer store.Close()
	rep, err := store.Restore(ctx, o)
	if err != nil {
		log.Error("restore failed", "err", err)
		return 1
	}
	log.Info("restore done", "highest_id_before", rep.Highest, "next_id", rep.Next,
		"key_packages_deleted", rep.KeyPackagesDeleted, "groups_in_catch_up", rep.GroupsInCatchUp,
		"pending_commits_expired", rep.PendingCommitsExpired)
	return 0
}
