package main

import (
	"bytes"
	"fmt"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/ports"
)

// collect prints the events a member reports that tell the story of the
// fork and its repair, until its client closes.
func (s *demoScenario) collect(m *demoMember) {
	defer s.collected.Done()
	for ev := range m.c.Events() {
		if text := s.describe(m, ev); text != "" {
			s.out.event(m.name, text)
		}
	}
}

// describe returns what an event says, or "" for events the demo does
// not show (joins, messages and the fork-state changes of healthy
// members, which every commit causes).
func (s *demoScenario) describe(m *demoMember, ev client.Event) string {
	switch e := ev.(type) {
	case client.ForkStateEvent:
		if e.State == ports.ForkForked {
			return fmt.Sprintf("%s %s reads forked: at commit #%d its log has %s…, %s's entry has %s…", s.kind(e.GroupID),
				demoHex(e.GroupID), e.SharedCommit, demoHex(e.Local), s.name(e.RemoteAuthor), demoHex(e.Remote))
		}
		if m == s.victim && bytes.Equal(e.GroupID, s.group) {
			return fmt.Sprintf("group %s fork state now %v", demoHex(e.GroupID), e.State)
		}
	case client.RecoveryEvent:
		text := fmt.Sprintf("%s for %s %s", e.Kind, s.kind(e.GroupID), demoHex(e.GroupID))
		if len(e.InstallationKey) > 0 {
			text += fmt.Sprintf(", installation %s (%s)", demoHex(e.InstallationKey), s.name(e.InstallationKey))
		}
		if e.CommitSequenceID != 0 {
			text += fmt.Sprintf(", commit #%d", e.CommitSequenceID)
		}
		if e.Reason != "" {
			text += ": " + e.Reason
		}
		return text
	case client.JoinedEvent:
		if e.Rejoined {
			return fmt.Sprintf("rejoined %s %s from %s's Welcome at epoch %d (the readd commit #%d)", s.kind(e.GroupID),
				demoHex(e.GroupID), s.name([]byte(e.AdderInbox)), e.Epoch, e.Anchor)
		}
	case client.MembershipEvent:
		if e.RemovedSelf {
			return fmt.Sprintf("processed its removal from %s %s at commit #%d", s.kind(e.GroupID), demoHex(e.GroupID), e.CommitSequenceID)
		}
		if len(e.Readded) > 0 && m == s.victim {
			return fmt.Sprintf("merged readd commit #%d of %s", e.CommitSequenceID, s.names[string(e.Readded[0])])
		}
	case client.WelcomeEvent:
		if e.Rejected {
			return fmt.Sprintf("rejected a Welcome (#%d): %s", e.SequenceID, e.Reason)
		}
	case client.CommitRejectedEvent:
		return fmt.Sprintf("rejected commit #%d of %s %s: %s", e.CommitSequenceID, s.kind(e.GroupID), demoHex(e.GroupID), e.Reason)
	}
	return ""
}

func (s *demoScenario) kind(id []byte) string {
	switch {
	case bytes.Equal(id, s.group):
		return "group"
	case bytes.Equal(id, s.dm):
		return "DM"
	}
	return "conversation"
}

// name returns the member name of an installation key or inbox id.
func (s *demoScenario) name(key []byte) string {
	if n, ok := s.names[string(key)]; ok {
		return n
	}
	return demoHex(key)
}
