package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/ports"
)

// disagreement returns what keeps the members of the conversation from
// agreeing — one inactive, at another epoch or epoch authenticator than
// the first, or not "not forked" — or "" when they agree.
func (s *demoScenario) disagreement(ctx context.Context, id []byte, ms []*demoMember) (string, error) {
	first, err := s.info(ctx, ms[0], id)
	if err != nil {
		return "", err
	}
	for _, m := range ms {
		info, err := s.info(ctx, m, id)
		if err != nil {
			return "", err
		}
		st, err := s.conv(ctx, m, id).ForkState(ctx)
		if err != nil {
			return "", fmt.Errorf("%s: fork state: %w", m.name, err)
		}
		switch {
		case !info.Active || info.Epoch != first.Epoch || !bytes.Equal(info.EpochAuthenticator, first.EpochAuthenticator):
			return fmt.Sprintf("%s at epoch %d (%s…, active %v), %s at epoch %d (%s…)", m.name, info.Epoch,
				demoHex(info.EpochAuthenticator), info.Active, ms[0].name, first.Epoch, demoHex(first.EpochAuthenticator)), nil
		case st.State != ports.ForkNotForked:
			return fmt.Sprintf("%s reads %v, want not forked", m.name, st.State), nil
		}
	}
	return "", nil
}

// sync runs one SyncAll of m: every topic read, commit logs published
// and read, then a recovery pass (COMP-207).
func (s *demoScenario) sync(ctx context.Context, m *demoMember) error {
	if err := m.c.SyncAll(ctx); err != nil {
		return fmt.Errorf("%s: sync: %w", m.name, err)
	}
	return nil
}

// round syncs each of ms once, in order.
func (s *demoScenario) round(ctx context.Context, ms ...*demoMember) error {
	for _, m := range ms {
		if err := s.sync(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

func (s *demoScenario) rounds(ctx context.Context, n int, ms ...*demoMember) error {
	for range n {
		if err := s.round(ctx, ms...); err != nil {
			return err
		}
	}
	return nil
}

// errDemoMissing reports an outcome that did not come within demoRounds
// syncs.
var errDemoMissing = fmt.Errorf("not there after %d syncs", demoRounds)

// waitFor checks done, syncing ms between checks, until it holds; it
// fails with errDemoMissing after demoRounds rounds.
func (s *demoScenario) waitFor(ctx context.Context, done func() (bool, error), ms ...*demoMember) error {
	for i := 0; ; i++ {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		if i == demoRounds {
			return errDemoMissing
		}
		if err := s.round(ctx, ms...); err != nil {
			return err
		}
	}
}

func (s *demoScenario) conv(ctx context.Context, m *demoMember, id []byte) demoConv {
	cv, err := m.c.Conversation(ctx, id)
	return demoConv{cv: cv, err: err, name: m.name}
}

func (s *demoScenario) info(ctx context.Context, m *demoMember, id []byte) (client.Info, error) {
	info, err := s.conv(ctx, m, id).Info(ctx)
	if err != nil {
		return info, fmt.Errorf("%s: %s %s: %w", m.name, s.kind(id), demoHex(id), err)
	}
	return info, nil
}

func (s *demoScenario) allow(ctx context.Context, id []byte, ms ...*demoMember) error {
	for _, m := range ms {
		if err := s.conv(ctx, m, id).SetConsent(ctx, ports.ConsentAllowed); err != nil {
			return fmt.Errorf("%s: allow %s %s: %w", m.name, s.kind(id), demoHex(id), err)
		}
	}
	return nil
}

// read returns the number of application messages m holds for the
// conversation.
func (s *demoScenario) read(ctx context.Context, m *demoMember, id []byte) (int, error) {
	msgs, err := s.conv(ctx, m, id).Messages(ctx)
	if err != nil {
		return 0, fmt.Errorf("%s: messages: %w", m.name, err)
	}
	n := 0
	for _, msg := range msgs {
		if msg.Kind == ports.MessageApplication {
			n++
		}
	}
	return n, nil
}

func (s *demoScenario) everyoneRead(ctx context.Context, id []byte, want int, ms ...*demoMember) error {
	var short []string
	for _, m := range ms {
		n, err := s.read(ctx, m, id)
		if err != nil {
			return err
		}
		if n != want {
			short = append(short, fmt.Sprintf("%s read %d", m.name, n))
		}
	}
	if len(short) > 0 {
		return fmt.Errorf("want %d messages each in %s %s: %s", want, s.kind(id), demoHex(id), strings.Join(short, ", "))
	}
	return nil
}

// readdsOf returns the sequence ids of the commits m merged that readded
// key, read from m's group-update records.
func (s *demoScenario) readdsOf(ctx context.Context, m *demoMember, id, key []byte) ([]uint64, error) {
	msgs, err := s.conv(ctx, m, id).Messages(ctx)
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, msg := range msgs {
		if msg.Kind != ports.MessageGroupUpdated {
			continue
		}
		u, err := client.DecodeGroupUpdate(msg.Content)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.name, err)
		}
		if slices.ContainsFunc(u.Readded, func(k []byte) bool { return bytes.Equal(k, key) }) {
			out = append(out, msg.SequenceID)
		}
	}
	return out, nil
}

// demoConv is a member's conversation, or the error of looking it up,
// returned by every method; it keeps the steps' code straight.
type demoConv struct {
	cv   *client.Conversation
	err  error
	name string
}

func (c demoConv) fail() error {
	return fmt.Errorf("%s: conversation: %w", c.name, c.err)
}

func (c demoConv) Send(ctx context.Context, content []byte) (uint64, error) {
	if c.err != nil {
		return 0, c.fail()
	}
	return c.cv.Send(ctx, content)
}

func (c demoConv) UpdateKeys(ctx context.Context) error {
	if c.err != nil {
		return c.fail()
	}
	return c.cv.UpdateKeys(ctx)
}

func (c demoConv) SetConsent(ctx context.Context, st ports.ConsentState) error {
	if c.err != nil {
		return c.fail()
	}
	return c.cv.SetConsent(ctx, st)
}

func (c demoConv) Info(ctx context.Context) (client.Info, error) {
	if c.err != nil {
		return client.Info{}, c.fail()
	}
	return c.cv.Info(ctx)
}

func (c demoConv) ForkState(ctx context.Context) (client.ForkStatus, error) {
	if c.err != nil {
		return client.ForkStatus{}, c.fail()
	}
	return c.cv.ForkState(ctx)
}

func (c demoConv) Messages(ctx context.Context) ([]ports.Message, error) {
	if c.err != nil {
		return nil, c.fail()
	}
	return c.cv.Messages(ctx, 0, 0)
}

// demoShort returns the first 8 characters of an id printed as text.
func demoShort(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
