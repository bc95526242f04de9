package client_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/ports"
)

// propertySeeds is how many random runs TestPropertyHonestRunsNeverFork
// makes; REGROUP_PROPERTY_RUNS raises it.
func propertySeeds() int {
	if n, err := strconv.Atoi(os.Getenv("REGROUP_PROPERTY_RUNS")); err == nil && n > 0 {
		return n
	}
	return 2
}

// In an honest run — random adds, removes, key updates and messages by
// 3 to 8 installations at once, so that commits race — no member is ever
// reported forked; at the end every active member holds the group at the
// same epoch and epoch authenticator, reads not forked, and holds every
// message sent in an epoch at or after its join.
func TestPropertyHonestRunsNeverFork(t *testing.T) {
	for run := 0; run < propertySeeds(); run++ {
		seed := uint64(time.Now().UnixNano()) + uint64(run)
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) { honestRun(t, newWorld(t, "embedded"), seed) })
	}
}

func honestRun(t *testing.T, w *world, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	// Inbox A (the creator's, super admin) has two installations; B has
	// one or two; C and D one each. 3 to 8 installations take part.
	a1 := w.newMember("a1", nil)
	ms := []*member{a1}
	if rng.IntN(2) == 0 {
		ms = append(ms, w.newMember("a2", a1.c.Identity().RecoveryKey))
	}
	b1 := w.newMember("b1", nil)
	ms = append(ms, b1)
	if rng.IntN(2) == 0 {
		ms = append(ms, w.newMember("b2", b1.c.Identity().RecoveryKey))
	}
	for _, n := range []string{"c", "d", "e", "f"}[:1+rng.IntN(4)] {
		ms = append(ms, w.newMember(n, nil))
	}
	if len(ms) > 8 {
		ms = ms[:8]
	}
	inboxes := map[string]bool{}
	for _, m := range ms {
		inboxes[m.c.InboxID()] = true
	}
	var others []string
	for inbox := range inboxes {
		if inbox != a1.c.InboxID() {
			others = append(others, inbox)
		}
	}
	forkedEvents := make(chan string, 100)
	for _, m := range ms {
		if err := m.c.Start(w.ctx); err != nil {
			t.Fatal(err)
		}
		go func(m *member) {
			for ev := range m.c.Events() {
				if f, ok := ev.(client.ForkStateEvent); ok && f.State == ports.ForkForked {
					forkedEvents <- m.name
				}
			}
		}(m)
	}
	g, err := a1.c.CreateGroup(w.ctx, client.GroupOptions{Members: others[:1]})
	if err != nil {
		t.Fatal(err)
	}
	id := g.ID()
	var sentMu sync.Mutex
	sent := map[string]uint64{} // content -> epoch it was sent in
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		go func(i int, m *member) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(i)))
			for op := 0; op < 12; op++ {
				time.Sleep(time.Duration(r.IntN(60)) * time.Millisecond)
				cv, err := m.c.Conversation(w.ctx, id)
				if err != nil {
					continue // not joined yet
				}
				info, err := cv.Info(w.ctx)
				if err != nil || !info.Active {
					continue
				}
				switch k := r.IntN(10); {
				case k < 6:
					text := fmt.Sprintf("%s-%d", m.name, op)
					if _, err := cv.Send(w.ctx, []byte(text)); err == nil {
						msgs, _ := cv.Messages(w.ctx, 0, 0)
						for _, msg := range msgs {
							if string(msg.Content) == text {
								sentMu.Lock()
								sent[text] = msg.Epoch
								sentMu.Unlock()
							}
						}
					}
				case k < 8:
					err = cv.UpdateKeys(w.ctx)
				case m.c.InboxID() == a1.c.InboxID() && k == 8:
					err = cv.AddMembers(w.ctx, others[r.IntN(len(others))])
				case m.c.InboxID() == a1.c.InboxID():
					err = cv.RemoveMembers(w.ctx, others[r.IntN(len(others))])
				}
				if err != nil && !expected(err) {
					t.Errorf("%s op %d: %v", m.name, op, err)
				}
			}
		}(i, m)
	}
	wg.Wait()
	// Quiesce: everyone catches up, the creator commits once more so every
	// active member has a shared commit to compare, and logs are exchanged.
	syncAll(ms...)
	if err := g.UpdateKeys(w.ctx); err != nil {
		t.Fatal(err)
	}
	syncAll(ms...)
	var active []*member
	for _, m := range ms {
		if cv, err := m.c.Conversation(w.ctx, id); err == nil {
			if info, _ := cv.Info(w.ctx); info.Active {
				active = append(active, m)
			}
		}
	}
	agree(t, id, active...)
	for _, m := range active {
		st, err := m.conv(id).ForkState(w.ctx)
		if err != nil || st.State != ports.ForkNotForked || st.MaybeForked {
			t.Errorf("%s: fork state %+v, %v; want not forked", m.name, st, err)
		}
		joinEpoch := joinEpochOf(t, m, id)
		have := map[string]bool{}
		for _, s := range texts(t, m, id) {
			have[s] = true
		}
		for text, epoch := range sent {
			if epoch >= joinEpoch && !have[text] && stillMemberAt(t, m, id, epoch) {
				t.Errorf("%s (joined at epoch %d) misses %q sent at epoch %d", m.name, joinEpoch, text, epoch)
			}
		}
	}
	close(forkedEvents)
	for name := range forkedEvents {
		t.Errorf("%s was reported forked in an honest run", name)
	}
}

// expected reports the errors a random operation may meet in an honest
// run: a commit lost to others, a member already added or gone, an
// installation removed meanwhile, a group whose state moved on.
func expected(err error) bool {
	return errors.Is(err, client.ErrCommitLost) || errors.Is(err, ports.ErrAlreadyExists) ||
		errors.Is(err, ports.ErrNotFound) || errors.Is(err, client.ErrInactiveConversation) ||
		errors.Is(err, client.ErrNotPermitted) || errors.Is(err, ports.ErrInactive) ||
		errors.Is(err, ports.ErrUnavailable)
}

// joinEpochOf returns the epoch of the member's current membership start:
// the epoch after the commit at its join anchor.
func joinEpochOf(t *testing.T, m *member, id []byte) uint64 {
	t.Helper()
	local, err := m.conv(id).LocalEntries(m.w.ctx)
	if err != nil {
		t.Fatal(err)
	}
	info := m.info(id)
	epoch := info.Epoch
	for i := len(local) - 1; i >= 0; i-- {
		if local[i].CommitResult == ports.CommitResultApplied && local[i].CommitSequenceID > 0 {
			epoch = local[i].AppliedEpochNumber - 1
		}
	}
	return epoch
}

// stillMemberAt is true: a member active at the end was a member through
// every epoch from its join on (a removal ends the state this test reads).
func stillMemberAt(t *testing.T, m *member, id []byte, epoch uint64) bool { return true }

var _ = bytes.Equal
