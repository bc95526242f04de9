package client_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// lossy fails publishes of group messages while failing is set: before
// storing them (lost requests) or after (lost responses).
type lossy struct {
	ports.Transport
	failing       atomic.Bool
	afterStoring  bool
	dropped, lost atomic.Int32
}

func (l *lossy) Publish(ctx context.Context, envs []*backendpb.ClientEnvelope) ([]uint64, error) {
	if !l.failing.Load() || envs[0].GetGroupMessage() == nil {
		return l.Transport.Publish(ctx, envs)
	}
	if l.afterStoring {
		if _, err := l.Transport.Publish(ctx, envs); err != nil {
			return nil, err
		}
		l.lost.Add(1)
	} else {
		l.dropped.Add(1)
	}
	return nil, fmt.Errorf("publish: %w", ports.ErrUnavailable)
}

// COMP-188: a message whose publish outcome was unknown is not lost: the
// workers publish the same bytes again once its confirmation is overdue,
// the recipient reads it once, and the sender confirms it once.
func TestCOMP188_UnconfirmedSendIsRepublished(t *testing.T) {
	for _, afterStoring := range []bool{false, true} {
		t.Run(fmt.Sprintf("stored-%v", afterStoring), func(t *testing.T) {
			w := world.New(t, "embedded")
			clk := clock.NewFake(time.Now())
			tr := &lossy{afterStoring: afterStoring}
			alice := w.Member("alice", world.Config{Clock: clk, Transport: func(inner ports.Transport) ports.Transport {
				tr.Transport = inner
				return tr
			}})
			bob := newMember(w, "bob", nil)
			g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Members: []string{bob.C.InboxID()}})
			if err != nil {
				t.Fatal(err)
			}
			bob.Sync()
			tr.failing.Store(true)
			if _, err := g.Send(w.Ctx, []byte("in doubt")); err == nil {
				t.Fatal("send succeeded through a failing transport")
			}
			tr.failing.Store(false)
			alice.Sync() // too early: nothing is resent before the grace period
			if !afterStoring {
				bob.Sync()
				if got := texts(t, bob, g.ID()); len(got) != 0 {
					t.Fatalf("bob holds %q before the grace period ended", got)
				}
			}
			clk.Advance(time.Minute)
			alice.Sync()
			alice.Sync()
			bob.Sync()
			if got := texts(t, bob, g.ID()); len(got) != 1 || got[0] != "in doubt" {
				t.Fatalf("bob holds %q, want the message once", got)
			}
			msgs, err := g.Messages(w.Ctx, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, m := range msgs {
				if m.Kind == ports.MessageApplication {
					n++
					if m.SequenceID == 0 {
						t.Errorf("alice's message is still unconfirmed")
					}
				}
			}
			if n != 1 {
				t.Errorf("alice holds %d copies of her message", n)
			}
		})
	}
}

// COMP-550: the outbox publishes the messages whose confirmation is
// overdue together, in one call, and confirms each at its own id.
func TestCOMP550_OutboxRepublishesInOneCall(t *testing.T) {
	w := world.New(t, "embedded")
	clk := clock.NewFake(time.Now())
	tr := &lossy{}
	pc := &publishCounter{}
	alice := w.Member("alice", world.Config{Clock: clk, Transport: func(inner ports.Transport) ports.Transport {
		pc.Transport = inner
		tr.Transport = pc
		return tr
	}})
	bob := newMember(w, "bob", nil)
	g, err := alice.C.CreateGroup(w.Ctx, client.GroupOptions{Members: []string{bob.C.InboxID()}})
	if err != nil {
		t.Fatal(err)
	}
	bob.Sync()
	const n = 5
	tr.failing.Store(true)
	for i := range n {
		if _, err := g.Send(w.Ctx, []byte(fmt.Sprintf("m%d", i))); err == nil {
			t.Fatal("send succeeded through a failing transport")
		}
	}
	tr.failing.Store(false)
	pc.calls.Store(0)
	pc.envs.Store(0)
	clk.Advance(time.Minute)
	alice.Sync()
	if calls, envs := pc.calls.Load(), pc.envs.Load(); calls != 1 || envs != n {
		t.Errorf("the outbox republished %d messages in %d calls, want %d in one", envs, calls, n)
	}
	msgs, err := g.Messages(w.Ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for _, m := range msgs {
		if m.Kind == ports.MessageApplication {
			if m.SequenceID == 0 || seen[m.SequenceID] {
				t.Errorf("message %q confirmed at %d", m.Content, m.SequenceID)
			}
			seen[m.SequenceID] = true
		}
	}
	bob.Sync()
	if got := texts(t, bob, g.ID()); len(got) != n {
		t.Fatalf("bob holds %q, want the %d messages once each", got, n)
	}
}
