package main

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/policy"
	"github.com/regroup-mls/regroup/internal/rogue"
	"github.com/regroup-mls/regroup/internal/world"
	"github.com/regroup-mls/regroup/ports"
)

// COMP-403: regroupd with acceptance on refuses an application message
// that a viewer's installation publishes on the group's topic, judging the
// authenticated connection's installation by the identity updates it
// stores; it stores it nowhere. The same member's message passed before
// it was made a viewer; its leave request (the kind in the message's
// authenticated data) and its own key update still pass, and the group
// goes on. /metrics counts the refusal by its reason.
func TestCOMP403_ViewerMessageRefusedByConnection(t *testing.T) {
	for _, mode := range acceptModes {
		t.Run(mode, func(t *testing.T) {
			health := freeAddr(t)
			a := newAcceptanceWith(t, mode, 4*time.Minute, "-health-listen", health)
			alice := a.member("alice", world.Config{MLS: rogue.Engine})
			mallory := a.member("mallory", world.Config{MLS: rogue.Engine})
			id := a.newGroup(alice, mallory)
			send := func(kind ports.MessageKind, text string) error {
				_, err := rogue.Of(mallory).Send(id, kind, []byte(text))
				return err
			}
			if err := send(ports.MessageApplication, "a member's message"); err != nil {
				t.Fatalf("mallory's message before she is a viewer: %v", err)
			}
			if _, err := rogue.Of(alice).SetViewers(id, mallory.C.InboxID()); err != nil {
				t.Fatalf("the super admin makes mallory a viewer: %v", err)
			}
			world.SyncAll(alice, mallory)
			before := a.highest(ports.TopicGroupMessages, id)
			err := send(ports.MessageApplication, "a viewer's message")
			if !errors.Is(err, ports.ErrInvalidArgument) || !strings.Contains(err.Error(), policy.ErrMessageNotPermitted.Error()) {
				t.Fatalf("a viewer's application message: %v, want a refusal naming the viewer rule", err)
			}
			if got := a.highest(ports.TopicGroupMessages, id); got != before {
				t.Fatalf("the viewer's message was stored (highest %d → %d)", before, got)
			}
			const line = `regroupd_publish_refusals_total{kind="group_messages",reason="public_viewer_message"}`
			if got := scrapeAddr(t, health)[line]; got != 1 {
				t.Fatalf("/metrics %s = %v, want 1", line, got)
			}
			if err := mallory.Conv(id).UpdateKeys(a.Ctx); err != nil {
				t.Fatalf("the viewer's own key update: %v", err)
			}
			beforeLeave := a.highest(ports.TopicGroupMessages, id)
			if err := send(ports.MessageLeaveRequest, ""); err != nil {
				t.Fatalf("the viewer's leave request: %v", err)
			}
			if got := a.highest(ports.TopicGroupMessages, id); got <= beforeLeave {
				t.Fatalf("the viewer's leave request was not stored (highest %d → %d)", beforeLeave, got)
			}
			if _, err := alice.Conv(id).Send(a.Ctx, []byte("the owner writes on")); err != nil {
				t.Fatalf("the super admin's message: %v", err)
			}
			world.SyncAll(alice, mallory)
			// The leave request ends the viewer's membership: the super
			// admin's client removed it (COMP-477).
			if mallory.Info(id).Active {
				t.Fatal("the viewer is still a member after its leave request")
			}
			a.follows(id, alice)
		})
	}
}

// freeAddr returns a 127.0.0.1 address no listener holds now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// scrapeAddr returns every sample of /metrics served at addr, keyed by
// the line's name and labels.
func scrapeAddr(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}
