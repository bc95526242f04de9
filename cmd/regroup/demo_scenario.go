package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/mlsfault"
)

// demoRounds bounds how many times the demo syncs the members a step
// waits on before it declares the step's outcome missing. Every outcome
// the demo waits for needs one or two syncs; more would mean it never
// comes.
const demoRounds = 4

// demoScenario is one run of the demo: a group of every member created by
// the first (its only super admin, so the only readder), a DM of the first
// and the last member, and a fork of the second member's view of the
// group, detected and repaired.
type demoScenario struct {
	cfg demoConfig
	out *demoOutput
	w   *demoWorld
	ms  []*demoMember
	// creator is the group's creator and readder, victim the member
	// forked, peer the creator's DM partner.
	creator, victim, peer *demoMember
	group, dm             []byte
	// names maps installation keys and inbox ids to member names.
	names map[string]string
	// readd is the sequence id of the readd commit.
	readd     uint64
	collected sync.WaitGroup
}

// run runs every step in order and returns the first failure, a
// *demoStepError.
func (s *demoScenario) run(ctx context.Context) error {
	steps := []struct {
		name string
		fn   func(context.Context) (string, error)
	}{
		{"delivery service", s.service},
		{"members", s.members},
		{"group", s.createGroup},
		{"messages", s.messages},
		{"dm", s.createDM},
		{"fork", s.fork},
		{"detection", s.detect},
		{"readd request", s.request},
		{"readd commit", s.readdCommit},
		{"rejoin", s.rejoin},
		{"agreement", s.agreement},
		{"after the repair", s.afterRepair},
	}
	for _, st := range steps {
		detail, err := st.fn(ctx)
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			s.out.failed(st.name, err)
			return &demoStepError{Step: st.name, Err: err}
		}
		s.out.step(st.name, detail)
	}
	return s.tables(ctx)
}

// close closes the members and the delivery service and removes what the
// demo stored.
func (s *demoScenario) close() {
	if s.w != nil {
		s.w.close()
	}
	s.collected.Wait()
}

func (s *demoScenario) service(ctx context.Context) (string, error) {
	w, err := demoOpenWorld(ctx, s.cfg)
	if err != nil {
		return "", err
	}
	s.w = w
	var backend, where string
	switch {
	case s.cfg.server != "":
		backend, where = "server", "the regroupd at "+s.cfg.server+" over gRPC"
	case s.cfg.postgres != "":
		backend, where = "postgres", "an in-process delivery service on PostgreSQL"
	default:
		backend, where = "embedded", "an in-process delivery service on SQLite"
	}
	stores := "its own SQLite store"
	if s.cfg.postgres != "" {
		stores = "its own PostgreSQL schema"
	}
	s.out.header(backend, fmt.Sprintf("regroup demo: %d members on %s, each with %s; fault %s", s.cfg.members, where, stores, s.cfg.fault))
	if s.cfg.server != "" {
		return "members connect to " + s.cfg.server, nil
	}
	if s.cfg.postgres != "" {
		return "in process, envelopes in PostgreSQL schema " + w.schemas[0], nil
	}
	return "in process, envelopes in " + filepath.Join(w.dir, "delivery.db"), nil
}

// members makes every installation: a new inbox each, key package
// published. Every member asks to be readded when forked; the victim of
// a fault that diverges its epoch secrets also accepts the opt-in repair
// (COMP-205), without which only the readd commit could repair it, and
// it cannot process that commit (COMP-208).
func (s *demoScenario) members(ctx context.Context) (string, error) {
	s.names = map[string]string{}
	for i := range s.cfg.members {
		name := fmt.Sprintf("member%d", i+1)
		if i < len(demoNames) {
			name = demoNames[i]
		}
		pol := client.RecoveryPolicy{Mode: client.RecoverAll, DisableResponses: s.cfg.disableResponses}
		if i == 1 && s.cfg.fault != mlsfault.MisrecordAuthenticator {
			pol.RepairDiverged = true
		}
		m, err := s.w.member(ctx, name, &client.Options{Recovery: pol})
		if err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		s.ms = append(s.ms, m)
		s.names[string(m.c.InstallationKey())] = name
		s.names[m.c.InboxID()] = name
		s.collected.Add(1)
		go s.collect(m)
		s.out.event(name, fmt.Sprintf("inbox %s, installation %s", demoShort(m.c.InboxID()), demoHex(m.c.InstallationKey())))
	}
	s.creator, s.victim, s.peer = s.ms[0], s.ms[1], s.ms[len(s.ms)-1]
	return fmt.Sprintf("%d installations, each with a new inbox and a published key package", len(s.ms)), nil
}

func (s *demoScenario) createGroup(ctx context.Context) (string, error) {
	var inboxes []string
	for _, m := range s.ms[1:] {
		inboxes = append(inboxes, m.c.InboxID())
	}
	g, err := s.creator.c.CreateGroup(ctx, client.GroupOptions{Name: "demo", Members: inboxes})
	if err != nil {
		return "", fmt.Errorf("%s: create group: %w", s.creator.name, err)
	}
	s.group = g.ID()
	if err := s.round(ctx, s.ms...); err != nil { // each joins from its Welcome
		return "", err
	}
	// Consent: a member reads the commit log of the conversations it
	// allowed (FORK-030).
	if err := s.allow(ctx, s.group, s.ms...); err != nil {
		return "", err
	}
	info, err := s.info(ctx, s.creator, s.group)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s created group %s; %d members joined from their Welcomes; epoch %d",
		s.creator.name, demoHex(s.group), len(s.ms)-1, info.Epoch), nil
}

func (s *demoScenario) messages(ctx context.Context) (string, error) {
	for _, m := range s.ms {
		if _, err := s.conv(ctx, m, s.group).Send(ctx, []byte("hello from "+m.name)); err != nil {
			return "", fmt.Errorf("%s: send: %w", m.name, err)
		}
	}
	if err := s.rounds(ctx, 2, s.ms...); err != nil {
		return "", err
	}
	if err := s.everyoneRead(ctx, s.group, len(s.ms), s.ms...); err != nil {
		return "", err
	}
	return fmt.Sprintf("each member sent one message; each read all %d", len(s.ms)), nil
}

func (s *demoScenario) createDM(ctx context.Context) (string, error) {
	cv, err := s.creator.c.CreateDM(ctx, s.peer.c.InboxID())
	if err != nil {
		return "", fmt.Errorf("%s: create DM: %w", s.creator.name, err)
	}
	s.dm = cv.ID()
	if err := s.sync(ctx, s.peer); err != nil {
		return "", err
	}
	if err := s.allow(ctx, s.dm, s.creator, s.peer); err != nil {
		return "", err
	}
	for _, m := range []*demoMember{s.creator, s.peer} {
		if _, err := s.conv(ctx, m, s.dm).Send(ctx, []byte("hi, it's "+m.name)); err != nil {
			return "", fmt.Errorf("%s: send: %w", m.name, err)
		}
		if err := s.rounds(ctx, 1, s.creator, s.peer); err != nil {
			return "", err
		}
	}
	if err := s.everyoneRead(ctx, s.dm, 2, s.creator, s.peer); err != nil {
		return "", err
	}
	// A joiner's fork state is unknown until its log and its peer's share
	// a commit after its join: the peer rotates its keys.
	if err := s.conv(ctx, s.peer, s.dm).UpdateKeys(ctx); err != nil {
		return "", fmt.Errorf("%s: update keys: %w", s.peer.name, err)
	}
	pair := []*demoMember{s.creator, s.peer}
	var problem string
	if err := s.waitFor(ctx, func() (bool, error) {
		var err error
		problem, err = s.disagreement(ctx, s.dm, pair)
		return problem == "", err
	}, pair...); err != nil {
		return "", fmt.Errorf("the DM is not healthy: %s: %w", problem, err)
	}
	info, err := s.info(ctx, s.creator, s.dm)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s and %s opened DM %s, exchanged 2 messages, %s rotated keys; both at epoch %d, not forked",
		s.creator.name, s.peer.name, demoHex(s.dm), s.peer.name, info.Epoch), nil
}

// fork arms the fault on the victim and has the creator commit: the
// victim merges (or refuses) that commit under the fault.
func (s *demoScenario) fork(ctx context.Context) (string, error) {
	if err := s.sync(ctx, s.victim); err != nil {
		return "", err
	}
	s.victim.engine.Arm(s.group, s.cfg.fault)
	if err := s.conv(ctx, s.creator, s.group).UpdateKeys(ctx); err != nil {
		return "", fmt.Errorf("%s: update keys: %w", s.creator.name, err)
	}
	if err := s.sync(ctx, s.creator); err != nil { // publishes its commit-log entry
		return "", err
	}
	if err := s.sync(ctx, s.victim); err != nil {
		return "", err
	}
	if n := s.victim.engine.Fired(s.group, s.cfg.fault); n == 0 {
		return "", fmt.Errorf("the fault %s did not fire on %s", s.cfg.fault, s.victim.name)
	}
	info, err := s.info(ctx, s.creator, s.group)
	if err != nil {
		return "", err
	}
	what := map[mlsfault.Fault]string{
		mlsfault.MisrecordAuthenticator: "merged it, but his log records another epoch authenticator (his MLS state is the group's)",
		mlsfault.RefuseWinner:           "refused it and merged a commit of his own instead (his epoch secrets diverge)",
		mlsfault.DivergeAfterMerge:      "merged it and then a private commit nobody else sees (his epoch secrets diverge)",
	}[s.cfg.fault]
	return fmt.Sprintf("%s committed a key update (epoch %d); %s %s", s.creator.name, info.Epoch, s.victim.name, what), nil
}

// detect checks that the victim's commit log reads forked and the
// others' do not.
func (s *demoScenario) detect(ctx context.Context) (string, error) {
	st, err := s.conv(ctx, s.victim, s.group).ForkState(ctx)
	if err != nil {
		return "", fmt.Errorf("%s: fork state: %w", s.victim.name, err)
	}
	if st.State != ports.ForkForked {
		return "", fmt.Errorf("%s's commit log reads %v after the fault, want forked: the fork was not detected", s.victim.name, st.State)
	}
	for _, m := range s.ms {
		if m == s.victim {
			continue
		}
		if ost, err := s.conv(ctx, m, s.group).ForkState(ctx); err != nil || ost.State == ports.ForkForked {
			return "", fmt.Errorf("%s reads %v (%v), want only %s forked", m.name, ost.State, err, s.victim.name)
		}
	}
	maybe := "no"
	if st.MaybeForked {
		maybe = "yes (" + st.MaybeForkedReason + ")"
	}
	return fmt.Sprintf("%s's commit log reads forked; maybe_forked: %s; the others' do not", s.victim.name, maybe), nil
}

// request waits for the victim's readd request (FORK-050), sent by its
// recovery pass once the conversation reads forked.
func (s *demoScenario) request(ctx context.Context) (string, error) {
	key := s.victim.c.InstallationKey()
	var st ports.ReaddStatus
	err := s.waitFor(ctx, func() (bool, error) {
		var err error
		st, err = s.victim.readdStatus(ctx, s.group, key)
		return st.RequestedAt != 0, err
	}, s.victim)
	if err != nil {
		return "", fmt.Errorf("%s sent no readd request: %w", s.victim.name, err)
	}
	return fmt.Sprintf("%s asked the group's readders (%s, its super admin) to readd installation %s; latest commit #%d",
		s.victim.name, s.creator.name, demoHex(key), st.RequestedAt), nil
}

// readdCommit waits for the creator to answer with a readd commit: one
// commit removing the victim's installation and adding it back.
func (s *demoScenario) readdCommit(ctx context.Context) (string, error) {
	key := s.victim.c.InstallationKey()
	err := s.waitFor(ctx, func() (bool, error) {
		seqs, err := s.readdsOf(ctx, s.creator, s.group, key)
		if len(seqs) > 0 {
			s.readd = seqs[0]
		}
		return len(seqs) > 0, err
	}, s.creator)
	if err != nil {
		return "", fmt.Errorf("no readd commit of %s by %s: %w", s.victim.name, s.creator.name, err)
	}
	return fmt.Sprintf("%s published readd commit #%d: remove installation %s and add it back with a fresh key package",
		s.creator.name, s.readd, demoHex(key)), nil
}

// rejoin waits for the victim to hold the group again, at the readder's
// epoch, past the readd commit.
func (s *demoScenario) rejoin(ctx context.Context) (string, error) {
	var info client.Info
	err := s.waitFor(ctx, func() (bool, error) {
		want, err := s.info(ctx, s.creator, s.group)
		if err != nil {
			return false, err
		}
		info, err = s.info(ctx, s.victim, s.group)
		return info.Active && info.Cursor >= s.readd && info.Epoch == want.Epoch &&
			bytes.Equal(info.EpochAuthenticator, want.EpochAuthenticator), err
	}, s.victim)
	if err != nil {
		return "", fmt.Errorf("%s did not rejoin at the readd commit #%d (epoch %d, cursor %d, active %v): %w",
			s.victim.name, s.readd, info.Epoch, info.Cursor, info.Active, err)
	}
	st, err := s.conv(ctx, s.victim, s.group).ForkState(ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s joined again from %s's Welcome: active at epoch %d (%s…), fork state %v",
		s.victim.name, s.creator.name, info.Epoch, demoHex(info.EpochAuthenticator), st.State), nil
}

// agreement has the creator commit once more, so that every member's log
// has an entry after the repair to agree on, and checks the end state:
// every member active at the same epoch and epoch authenticator, and not
// forked.
func (s *demoScenario) agreement(ctx context.Context) (string, error) {
	if err := s.round(ctx, s.ms...); err != nil {
		return "", err
	}
	if err := s.conv(ctx, s.creator, s.group).UpdateKeys(ctx); err != nil {
		return "", fmt.Errorf("%s: update keys: %w", s.creator.name, err)
	}
	var problem string
	err := s.waitFor(ctx, func() (bool, error) {
		var err error
		problem, err = s.disagreement(ctx, s.group, s.ms)
		return problem == "", err
	}, s.ms...)
	if err != nil {
		return "", fmt.Errorf("%s: %w", problem, err)
	}
	first, err := s.info(ctx, s.creator, s.group)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s committed once more; all %d members at epoch %d (%s…), not forked",
		s.creator.name, len(s.ms), first.Epoch, demoHex(first.EpochAuthenticator)), nil
}

// afterRepair has the repaired member send to the group and checks that
// everyone reads it, and that the member kept its messages (JOIN-044).
func (s *demoScenario) afterRepair(ctx context.Context) (string, error) {
	if _, err := s.conv(ctx, s.victim, s.group).Send(ctx, []byte("back in the group")); err != nil {
		return "", fmt.Errorf("%s: send: %w", s.victim.name, err)
	}
	if err := s.rounds(ctx, 1, s.ms...); err != nil {
		return "", err
	}
	if err := s.everyoneRead(ctx, s.group, len(s.ms)+1, s.ms...); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s sent to the group; every member read it and kept all %d messages", s.victim.name, len(s.ms)+1), nil
}

// tables prints the final state of the group and the DM.
func (s *demoScenario) tables(ctx context.Context) error {
	for _, c := range []struct {
		title string
		id    []byte
		ms    []*demoMember
	}{{"group", s.group, s.ms}, {"DM", s.dm, []*demoMember{s.creator, s.peer}}} {
		t, err := s.table(ctx, c.title, c.id, c.ms)
		if err != nil {
			return &demoStepError{Step: "final state", Err: err}
		}
		s.out.table(t)
	}
	return nil
}

func (s *demoScenario) table(ctx context.Context, title string, id []byte, ms []*demoMember) (demoTable, error) {
	t := demoTable{Title: title, ID: demoHex(id)}
	for _, m := range ms {
		info, err := s.info(ctx, m, id)
		if err != nil {
			return t, err
		}
		st, err := s.conv(ctx, m, id).ForkState(ctx)
		if err != nil {
			return t, fmt.Errorf("%s: fork state: %w", m.name, err)
		}
		n, err := s.read(ctx, m, id)
		if err != nil {
			return t, err
		}
		t.Rows = append(t.Rows, demoRow{Member: m.name, Active: info.Active, Epoch: info.Epoch,
			Authenticator: demoHex(info.EpochAuthenticator), ForkState: st.State.String(), MessagesRead: n})
	}
	return t, nil
}
