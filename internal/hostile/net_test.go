package hostile_test

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/ports/transportfault"
)

// net is one world whose members all reach the delivery service through
// one hostile operator, on one fake clock.
type net struct {
	t   *testing.T
	w   *world.World
	op  *transportfault.Operator
	clk *clock.Fake
	// errs are the errors the members' passes returned, other than
	// unavailability, by text: reported when an invariant fails.
	errs map[string]int
	// rounds bounds settle's sync rounds; 0 means 24.
	rounds int
}

func newNet(t *testing.T, mode string, opts transportfault.Options) *net {
	t.Helper()
	n := &net{t: t, w: world.NewFor(t, mode, time.Minute), op: transportfault.New(opts),
		clk: clock.NewFake(time.Now().UTC()), errs: map[string]int{}}
	// Whoever waits on the clock (a retry window, a worker's tick) sees
	// it move on, a second every few milliseconds.
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if n.clk.Waiters() > 0 {
					n.clk.Advance(time.Second)
				}
			}
		}
	}()
	return n
}

// membership has m change the group's members with op (an add or a
// removal) until m's own view shows the change (done), as an app repeats
// a change that failed: an unavailable or lying service may stop it
// before it was built, or deny the identity lookups it needs. A refusal
// by permission fails the test.
func (n *net) membership(m *world.Member, id []byte, what string, op func(cv *client.Conversation) error, done func([]client.Member) bool) {
	n.t.Helper()
	var err error
	for i := 0; i < 30; i++ {
		cv := m.Conv(id)
		if ms, merr := cv.Members(n.w.Ctx); merr == nil && done(ms) {
			return
		}
		if err = op(cv); errors.Is(err, client.ErrNotPermitted) {
			break
		}
		if err != nil {
			_ = m.C.SyncAll(n.w.Ctx) // settles a commit left pending
		}
	}
	n.t.Fatalf("%s: %s: %v", m.Name, what, err)
}

// member makes an installation behind the operator; the operator is
// paused while it publishes its identity and first key package.
func (n *net) member(name string, opts *client.Options, recovery ed25519.PrivateKey) *world.Member {
	n.t.Helper()
	n.op.Pause()
	defer n.op.Resume()
	return n.w.Member(name, world.Config{Options: opts, Clock: n.clk, RecoveryKey: recovery,
		Transport: func(tr ports.Transport) ports.Transport { return n.op.Wrap(tr) }})
}

// ok accepts err when it is nil or leaves an outcome the client settles
// by itself (an unavailable delivery service: the outbox retries a
// stored message), and fails the test otherwise.
func (n *net) ok(m *world.Member, what string, err error) {
	n.t.Helper()
	if err != nil && !errors.Is(err, ports.ErrUnavailable) {
		n.t.Fatalf("%s: %s: %v", m.Name, what, err)
	}
}

// settle runs sync rounds of every member, the clock 11 s further each
// round (so the outbox's resend and the recovery's attempts come due),
// until done holds after at least two rounds; it fails the test with
// done's last answer after n.rounds rounds.
func (n *net) settle(what string, done func() error, ms ...*world.Member) {
	n.t.Helper()
	rounds := n.rounds
	if rounds == 0 {
		rounds = 24
	}
	if last := n.poll(rounds, done, ms...); last != nil {
		n.fail(what, rounds, last, ms...)
	}
}

// poll runs up to rounds sync rounds of every member as settle does and
// returns nil once done holds after at least two rounds, done's last
// answer otherwise.
func (n *net) poll(rounds int, done func() error, ms ...*world.Member) error {
	n.t.Helper()
	var last error
	for round := 0; round < rounds; round++ {
		for _, m := range ms {
			if err := m.C.SyncAll(n.w.Ctx); err != nil {
				if os.Getenv("REGROUP_HOSTILE_DEBUG") != "" {
					n.t.Logf("%s: pass: %v", m.Name, err)
				}
				if !errors.Is(err, ports.ErrUnavailable) {
					n.errs[err.Error()]++
				}
			}
		}
		n.clk.Advance(11 * time.Second)
		if last = done(); last == nil && round >= 1 {
			return nil
		}
	}
	return last
}

// fail reports the members' state and the pass errors seen, and fails
// the test: what's invariant was still broken (last) after rounds rounds.
func (n *net) fail(what string, rounds int, last error, ms ...*world.Member) {
	n.t.Helper()
	var seen []string
	for e := range n.errs {
		seen = append(seen, e)
	}
	slices.Sort(seen)
	for _, m := range ms {
		for _, cv := range must(m.C.Conversations(n.w.Ctx, nil)) {
			i, _ := cv.Info(n.w.Ctx)
			st, _ := cv.ForkState(n.w.Ctx)
			n.t.Logf("%s: conversation %x epoch %d active %v fork state %v", m.Name, cv.ID()[:4], i.Epoch, i.Active, st.State)
			if os.Getenv("REGROUP_HOSTILE_DEBUG") != "" {
				m.Tx(func(tx ports.Tx) error {
					for _, o := range ms {
						if s, err := tx.Readds().Get(n.w.Ctx, cv.ID(), o.C.InstallationKey()); err == nil {
							n.t.Logf("  readd status of %s: %+v", o.Name, s)
						}
					}
					return nil
				})
			}
		}
	}
	n.t.Logf("clock at %v", n.clk.Now())
	n.t.Fatalf("%s: invariant broken after %d rounds: %v\npass errors: %q", what, rounds, last, seen)
}

// info returns m's view of the conversation, or an error when it has none.
func info(m *world.Member, id []byte) (client.Info, error) {
	cv, err := m.C.Conversation(m.W.Ctx, id)
	if err != nil {
		return client.Info{}, fmt.Errorf("%s has no conversation %x: %w", m.Name, id[:4], err)
	}
	return cv.Info(m.W.Ctx)
}

// agree: every member holds the group active at the same epoch and epoch
// authenticator (converged, not forked in secrets).
func agree(id []byte, ms ...*world.Member) error {
	var first client.Info
	for i, m := range ms {
		got, err := info(m, id)
		if err != nil {
			return err
		}
		if !got.Active {
			return fmt.Errorf("%s: group inactive", m.Name)
		}
		if i == 0 {
			first = got
			continue
		}
		if got.Epoch != first.Epoch || !bytes.Equal(got.EpochAuthenticator, first.EpochAuthenticator) {
			return fmt.Errorf("%s at epoch %d, %s at epoch %d (or another authenticator)", ms[0].Name, first.Epoch, m.Name, got.Epoch)
		}
	}
	return nil
}

// holds: every member holds each of want exactly once (no message lost,
// none stored twice) and no other application message.
func holds(id []byte, want []string, ms ...*world.Member) error {
	for _, m := range ms {
		cv, err := m.C.Conversation(m.W.Ctx, id)
		if err != nil {
			return err
		}
		msgs, err := cv.Messages(m.W.Ctx, 0, 0)
		if err != nil {
			return err
		}
		var got []string
		for _, msg := range msgs {
			if msg.Kind == ports.MessageApplication {
				got = append(got, string(msg.Content))
			}
		}
		slices.Sort(got)
		w := slices.Sorted(slices.Values(want))
		if !slices.Equal(got, w) {
			return fmt.Errorf("%s holds %q, want %q once each", m.Name, got, w)
		}
	}
	return nil
}

// confirmed: every member's own messages were read back from the topic
// (each has a sequence id): none stays unsent.
func confirmed(id []byte, ms ...*world.Member) error {
	for _, m := range ms {
		cv, err := m.C.Conversation(m.W.Ctx, id)
		if err != nil {
			return err
		}
		msgs, err := cv.Messages(m.W.Ctx, 0, 0)
		if err != nil {
			return err
		}
		for _, msg := range msgs {
			if msg.Kind == ports.MessageApplication && msg.SequenceID == 0 {
				return fmt.Errorf("%s: %q never read back from the topic", m.Name, msg.Content)
			}
		}
	}
	return nil
}

// notForked: no member reports the conversation forked; with want set,
// every member reports exactly want.
func forkState(id []byte, want *ports.ForkState, ms ...*world.Member) error {
	for _, m := range ms {
		cv, err := m.C.Conversation(m.W.Ctx, id)
		if err != nil {
			return err
		}
		st, err := cv.ForkState(m.W.Ctx)
		if err != nil {
			return err
		}
		if st.State == ports.ForkForked || (want != nil && st.State != *want) {
			return fmt.Errorf("%s: fork state %v", m.Name, st.State)
		}
	}
	return nil
}

func notForked(id []byte, ms ...*world.Member) error { return forkState(id, nil, ms...) }

func allowed(n *net, id []byte, ms ...*world.Member) {
	n.t.Helper()
	for _, m := range ms {
		if err := m.Conv(id).SetConsent(n.w.Ctx, ports.ConsentAllowed); err != nil {
			n.t.Fatal(err)
		}
	}
}

// readds returns the sequence ids of the commits m merged that readded
// key.
func readds(m *world.Member, id, key []byte) ([]uint64, error) {
	cv, err := m.C.Conversation(m.W.Ctx, id)
	if err != nil {
		return nil, err
	}
	msgs, err := cv.Messages(m.W.Ctx, 0, 0)
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
			return nil, err
		}
		if slices.ContainsFunc(u.Readded, func(k []byte) bool { return bytes.Equal(k, key) }) {
			out = append(out, msg.SequenceID)
		}
	}
	return out, nil
}

func must[T any](v T, _ error) T { return v }
