// Command fork-repair shows, as plain library calls, how regroup detects
// a forked group from its commit log and repairs it: three members on one
// in-process delivery service, one of them forked on purpose, the fork
// detected, a readd requested and published, and every member agreeing
// again. It exits 0 when all of that happened and 1 otherwise.
//
//	go run ./examples/fork-repair
//
// `go run ./cmd/regroup demo` runs the same loop with more members, more
// faults and a printout of every step.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	regroup "github.com/regroup-mls/regroup"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/mlsfault"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	err := run(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fork-repair:", err)
		os.Exit(1)
	}
	fmt.Println("ok: bob's fork was detected and repaired; alice, bob and carol agree")
}

// member is one installation: its client, and its MLS engine behind the
// fault decorator so that we can fork it.
type member struct {
	name   string
	c      *client.Client
	engine *mlsfault.Engine
}

func run(ctx context.Context) error {
	// Everything lives in a temporary directory: the delivery service's
	// SQLite file and one SQLite file per client.
	dir, err := os.MkdirTemp("", "regroup-fork-repair-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	svc, closeService, err := regroup.OpenEmbeddedService(ctx, filepath.Join(dir, "delivery.db"), nil)
	if err != nil {
		return err
	}
	defer closeService()

	// The recovery policy is chosen per client (fork-recovery section 8).
	// By default a client answers others' readd requests but sends none;
	// bob asks to be readded to any conversation that forks.
	alice, closeAlice, err := newMember(ctx, svc, dir, "alice", nil)
	if err != nil {
		return err
	}
	defer closeAlice()
	bob, closeBob, err := newMember(ctx, svc, dir, "bob", &client.Options{Recovery: client.RecoveryPolicy{Mode: client.RecoverAll}})
	if err != nil {
		return err
	}
	defer closeBob()
	carol, closeCarol, err := newMember(ctx, svc, dir, "carol", nil)
	if err != nil {
		return err
	}
	defer closeCarol()
	all := []*member{alice, bob, carol}
	for _, m := range all {
		go printEvents(m)
	}

	// alice creates the group: she is its only super admin, so the only
	// member allowed to readd anyone. The others join from their Welcomes
	// on their next sync. A client reads the commit log only of the
	// conversations the user allowed (FORK-030), so everyone allows it.
	g, err := alice.c.CreateGroup(ctx, client.GroupOptions{Name: "fork-repair", Members: []string{bob.c.InboxID(), carol.c.InboxID()}})
	if err != nil {
		return err
	}
	group := g.ID()
	if err := syncAll(ctx, all...); err != nil {
		return err
	}
	for _, m := range all {
		cv, err := m.c.Conversation(ctx, group)
		if err != nil {
			return err
		}
		if err := cv.SetConsent(ctx, ports.ConsentAllowed); err != nil {
			return err
		}
	}

	// The fork: bob's decorator will misrecord the epoch authenticator of
	// the next commit he merges. His MLS state stays the group's, but the
	// commit-log entry he publishes for that commit disagrees with
	// alice's — the fork the readd of fork-recovery section 7 repairs.
	bob.engine.Arm(group, mlsfault.MisrecordAuthenticator)
	ga, err := alice.c.Conversation(ctx, group)
	if err != nil {
		return err
	}
	if err := ga.UpdateKeys(ctx); err != nil { // any commit will do
		return err
	}
	if err := syncAll(ctx, alice, bob); err != nil { // alice publishes her entry, bob merges and reads it
		return err
	}

	// Detection: bob's client compares its own log with the entries the
	// group's publishers put on the commit-log topic.
	if st, err := forkState(ctx, bob, group); err != nil || st != ports.ForkForked {
		return fmt.Errorf("bob reads %v (%v) after the fault, want forked", st, err)
	}
	fmt.Println("bob's commit log reads forked")

	// Repair. Each SyncAll ends with a recovery pass: bob's sends a readd
	// request to the readders (a one-shot Welcome to alice); alice's
	// answers it with one commit that removes bob's installation and adds
	// it back with a fresh key package; bob processes his removal and
	// joins again from her Welcome, keeping his messages. Two rounds let
	// each step reach the next member.
	if err := syncAll(ctx, all...); err != nil {
		return err
	}
	if err := syncAll(ctx, all...); err != nil {
		return err
	}

	// Right after the rejoin bob's fork state is unknown: nobody has
	// logged a commit since. One more commit, synced by everyone, and
	// every log agrees.
	if err := ga.UpdateKeys(ctx); err != nil {
		return err
	}
	if err := syncAll(ctx, all...); err != nil {
		return err
	}
	return agree(ctx, group, all...)
}

// newMember assembles a client from the root package's providers, as an
// app that does not use the wire injectors does. It differs from
// regroup.NewEmbedded in one line: the MLS engine is wrapped by
// mlsfault.Wrap. A real app passes the engine itself. The returned
// function closes the client and then its store.
func newMember(ctx context.Context, svc *delivery.Service, dir, name string, opts *client.Options) (*member, func(), error) {
	store, closeStore, err := regroup.OpenSQLiteStore(ctx, filepath.Join(dir, name, "client.db"))
	if err != nil {
		return nil, nil, err
	}
	m, closeClient, err := assemble(ctx, svc, store, name, opts)
	if err != nil {
		closeStore()
		return nil, nil, err
	}
	return m, func() { closeClient(); closeStore() }, nil
}

// assemble builds the client of a member on its store.
func assemble(ctx context.Context, svc *delivery.Service, store ports.Store, name string, opts *client.Options) (*member, func(), error) {
	clk := regroup.ProvideClock(nil)
	// A new store holds no identity: this creates a new inbox with this
	// installation in it.
	in, err := regroup.ProvideInstallation(ctx, store, clk, regroup.IdentityConfig{})
	if err != nil {
		return nil, nil, err
	}
	inner, err := regroup.ProvideEngine(in)
	if err != nil {
		return nil, nil, err
	}
	tr := regroup.ProvideMemTransport(svc, in)
	id, err := regroup.ProvideResolver(store, tr, clk)
	if err != nil {
		return nil, nil, err
	}
	reg, err := regroup.ProvideAlgorithms()
	if err != nil {
		return nil, nil, err
	}
	engine := mlsfault.Wrap(inner)
	deps := client.Deps{Store: store, MLS: engine, Transport: tr, Identity: id, Clock: clk, Algorithms: reg, Installation: in}
	// ProvideClient publishes the new inbox and a key package, so the
	// others can add this installation at once.
	c, closeClient, err := regroup.ProvideClient(ctx, deps, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	return &member{name: name, c: c, engine: engine}, closeClient, nil
}

// syncAll has each member read every topic once, in order. A long-running
// app calls Client.Start instead, and the workers do this on their own.
func syncAll(ctx context.Context, ms ...*member) error {
	for _, m := range ms {
		if err := m.c.SyncAll(ctx); err != nil {
			return fmt.Errorf("%s: sync: %w", m.name, err)
		}
	}
	return nil
}

// printEvents prints the steps of the repair as the member's client
// reports them, until the client closes.
func printEvents(m *member) {
	for ev := range m.c.Events() {
		switch e := ev.(type) {
		case client.RecoveryEvent: // request sent / received, readd published
			fmt.Printf("  %s: %s (commit #%d)\n", m.name, e.Kind, e.CommitSequenceID)
		case client.JoinedEvent:
			if e.Rejoined {
				fmt.Printf("  %s: rejoined the group at epoch %d\n", m.name, e.Epoch)
			}
		}
	}
}

func forkState(ctx context.Context, m *member, group []byte) (ports.ForkState, error) {
	cv, err := m.c.Conversation(ctx, group)
	if err != nil {
		return ports.ForkUnknown, err
	}
	st, err := cv.ForkState(ctx)
	return st.State, err
}

// agree checks the end state: every member active at the same epoch and
// epoch authenticator, and not forked.
func agree(ctx context.Context, group []byte, ms ...*member) error {
	var errs []error
	var first client.Info
	for i, m := range ms {
		cv, err := m.c.Conversation(ctx, group)
		if err != nil {
			return err
		}
		info, err := cv.Info(ctx)
		if err != nil {
			return err
		}
		if i == 0 {
			first = info
		}
		st, err := forkState(ctx, m, group)
		if err != nil {
			return err
		}
		fmt.Printf("%-6s epoch %d  authenticator %.4x…  %v\n", m.name, info.Epoch, info.EpochAuthenticator, st)
		if !info.Active || info.Epoch != first.Epoch || !bytes.Equal(info.EpochAuthenticator, first.EpochAuthenticator) {
			errs = append(errs, fmt.Errorf("%s is not at %s's epoch %d", m.name, ms[0].name, first.Epoch))
		}
		if st != ports.ForkNotForked {
			errs = append(errs, fmt.Errorf("%s reads %v, want not forked", m.name, st))
		}
	}
	return errors.Join(errs...)
}
