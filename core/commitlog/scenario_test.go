package commitlog_test

import (
	"testing"

	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/ports"
)

// groupOf sets up a group whose members are the clients, with admins as
// its super admins, every client holding the creation state.
func groupOf(t *testing.T, admins []string, names ...string) (*world, []*client) {
	w := newWorld(t, ports.ConversationGroup)
	w.g.admins = admins
	var cs []*client
	for _, n := range names {
		c := w.newClient(n, "inbox-"+n)
		w.g.members = append(w.g.members, member{inbox: c.inbox, key: c.pub})
		cs = append(cs, c)
	}
	for _, c := range cs {
		c.join(0)
	}
	w.pad(50)
	return w, cs
}

// A whole log with no fork: every member reads not forked.
func TestScenarioNoFork(t *testing.T) {
	t.Parallel()
	w, cs := groupOf(t, []string{"inbox-a"}, "a", "b", "c")
	a, b, c := cs[0], cs[1], cs[2]
	for i := 0; i < 4; i++ {
		seq := w.commit(nil)
		for _, m := range cs {
			m.merge(seq)
		}
	}
	a.reject(w.commit(nil), &ports.WrongEpochError{Relation: ports.EpochOlder}) // the loser of a race
	b.reject(w.g.seq, &ports.WrongEpochError{Relation: ports.EpochOlder})
	c.reject(w.g.seq, &ports.WrongEpochError{Relation: ports.EpochOlder})
	if rep := a.publish(); rep.Published != 5 {
		t.Fatalf("published %d entries, want 5", rep.Published)
	}
	for _, m := range cs {
		rep := m.read()
		if rep.Accepted != 5 {
			t.Fatalf("%s accepted %d, want 5 (%v)", m.name, rep.Accepted, m.log.Counters())
		}
		m.wantFork(ports.ForkNotForked)
	}
	if len(b.events) != 0 {
		t.Fatal("fork event without a fork")
	}
}

// Forked at the second entry although the first remote entry is a
// rejection: the rejection continues the chain, the divergent commit after
// it is where the fork shows, and the event names that commit.
func TestScenarioForkedAtSecondEntryAfterRejection(t *testing.T) {
	t.Parallel()
	w, cs := groupOf(t, []string{"inbox-a"}, "a", "b")
	a, b := cs[0], cs[1]
	s1 := w.commit(nil)
	w.g.epoch-- // nobody applies s1: it lost a race
	a.reject(s1, &ports.WrongEpochError{Relation: ports.EpochOlder})
	b.reject(s1, &ports.WrongEpochError{Relation: ports.EpochOlder})
	s2 := w.commit(nil)
	a.merge(s2)
	b.mergeForked(s2)
	a.publish()
	rep := b.read()
	if rep.Accepted != 2 || rep.ForkState != ports.ForkForked {
		t.Fatalf("b: %+v, counters %v", rep, b.log.Counters())
	}
	if r := b.remote(); r[0].CommitResult != ports.CommitResultWrongEpoch {
		t.Fatalf("first remote entry is %v, want a rejection", r[0].CommitResult)
	}
	if len(b.events) != 1 || b.events[0].CommitSequenceID != s2 {
		t.Fatalf("fork events %+v, want one at commit %d", b.events, s2)
	}
	a.read()
	a.wantFork(ports.ForkNotForked)
}

// A member removed and then readded by a Welcome is not forked: its
// removal entry keeps the pre-commit epoch and is never compared, and its
// earlier membership does not count.
func TestScenarioRemovalThenReaddNotForked(t *testing.T) {
	t.Parallel()
	w, cs := groupOf(t, []string{"inbox-a"}, "a", "b")
	a, b := cs[0], cs[1]
	s1 := w.commit(nil)
	a.merge(s1)
	b.merge(s1)
	s2 := w.commit(func(g *groupModel) { g.members = g.members[:1] }) // removes b
	a.merge(s2)
	b.merge(s2)
	if l := b.local(); !l[len(l)-1].RemovedThisInstallation || l[len(l)-1].AppliedEpochNumber != w.g.epoch-1 {
		t.Fatalf("removal entry %+v does not keep the pre-commit epoch", l[len(l)-1])
	}
	s3 := w.commit(func(g *groupModel) { g.members = append(g.members, member{inbox: b.inbox, key: b.pub}) })
	a.merge(s3)
	b.join(s3) // the Welcome of s3
	a.publish()
	b.read()
	b.wantFork(ports.ForkUnknown) // nothing of the new membership to compare yet
	s4 := w.commit(nil)
	a.merge(s4)
	b.merge(s4)
	a.publish()
	rep := b.read()
	if rep.Accepted != 1 || len(b.remote()) != 4 {
		t.Fatalf("b accepted %d, want 4 (%v)", rep.Accepted, b.log.Counters())
	}
	b.wantFork(ports.ForkNotForked)
	if len(b.events) != 0 {
		t.Fatal("removal compared as a fork")
	}
}

// The fork state stays unknown while the newest local entry has no remote
// counterpart, and becomes not forked once it has.
func TestScenarioUnknownWhileNewestLocalUnpublished(t *testing.T) {
	t.Parallel()
	w, cs := groupOf(t, []string{"inbox-a"}, "a", "b")
	a, b := cs[0], cs[1]
	s1, s2 := w.commit(nil), uint64(0)
	a.merge(s1)
	b.merge(s1)
	a.publish()
	s2 = w.commit(nil)
	b.merge(s2) // a has not processed s2 yet
	b.read()
	b.wantFork(ports.ForkUnknown)
	a.merge(s2)
	a.publish()
	b.read()
	b.wantFork(ports.ForkNotForked)
}

// A DM where both members publish: each reader keeps the first entry per
// commit and discards the other member's duplicate under the chain rule.
func TestScenarioDMBothMembersPublish(t *testing.T) {
	t.Parallel()
	w := newWorld(t, ports.ConversationDM)
	w.g.dm = [2]string{"inbox-a", "inbox-b"}
	a, b := w.newClient("a", "inbox-a"), w.newClient("b", "inbox-b")
	w.g.members = []member{{a.inbox, a.pub}, {b.inbox, b.pub}}
	a.join(0)
	b.join(0)
	w.pad(20)
	for i := 0; i < 3; i++ {
		s := w.commit(nil)
		a.merge(s)
		b.merge(s)
		a.publish()
		b.publish()
	}
	if got := len(w.topicEntries()); got != 6 {
		t.Fatalf("%d entries on the topic, want 6 (both members publish)", got)
	}
	authors := map[string]bool{}
	for _, e := range w.topicEntries() {
		authors[string(e.AuthorInstallationKey)] = true
	}
	if len(authors) != 2 {
		t.Fatal("both members should author entries")
	}
	for _, c := range []*client{a, b} {
		rep := c.read()
		if rep.Accepted != 3 || c.log.Counters()[commitlog.ReasonChain] != 3 {
			t.Fatalf("%s: %+v %v", c.name, rep, c.log.Counters())
		}
		c.wantFork(ports.ForkNotForked)
	}
}
