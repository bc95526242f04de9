package client_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/internal/world"
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
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) { honestRun(t, world.New(t, "embedded"), seed) })
	}
}

func honestRun(t *testing.T, w *world.World, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	// Inbox A (the creator's, super admin) has two installations; B has
	// one or two; C and D one each. 3 to 8 installations take part.
	a1 := newMember(w, "a1", nil)
	ms := []*world.Member{a1}
	if rng.IntN(2) == 0 {
		ms = append(ms, newMember(w, "a2", a1.C.Identity().RecoveryKey))
	}
	b1 := newMember(w, "b1", nil)
	ms = append(ms, b1)
	if rng.IntN(2) == 0 {
		ms = append(ms, newMember(w, "b2", b1.C.Identity().RecoveryKey))
	}
	for _, n := range []string{"c", "d", "e", "f"}[:1+rng.IntN(4)] {
		ms = append(ms, newMember(w, n, nil))
	}
	if len(ms) > 8 {
		ms = ms[:8]
	}
	inboxes := map[string]bool{}
	for _, m := range ms {
		inboxes[m.C.InboxID()] = true
	}
	var others []string
	for inbox := range inboxes {
		if inbox != a1.C.InboxID() {
			others = append(others, inbox)
		}
	}
	forkedEvents := make(chan string, 100)
	var joinMu, raceMu sync.Mutex
	raced := map[uint64]bool{}       // commits that lost a race, as members saw them
	joinEpoch := map[string]uint64{} // member -> first epoch of its newest membership
	var readers sync.WaitGroup
	for _, m := range ms {
		if err := m.C.Start(w.Ctx); err != nil {
			t.Fatal(err)
		}
		readers.Add(1)
		go func(m *world.Member) {
			defer readers.Done()
			for ev := range m.C.Events() {
				switch e := ev.(type) {
				case client.ForkStateEvent:
					if e.State == ports.ForkForked {
						forkedEvents <- m.Name
					}
				case client.JoinedEvent:
					joinMu.Lock()
					joinEpoch[m.Name] = e.Epoch
					joinMu.Unlock()
				case client.CommitRejectedEvent:
					if e.Result == ports.CommitResultWrongEpoch {
						raceMu.Lock()
						raced[e.CommitSequenceID] = true
						raceMu.Unlock()
					}
				}
			}
		}(m)
	}
	g, err := a1.C.CreateGroup(w.Ctx, client.GroupOptions{Members: others[:1]})
	if err != nil {
		t.Fatal(err)
	}
	id := g.ID()
	var sentMu sync.Mutex
	sent := map[string]uint64{} // content -> epoch it was sent in
	var statMu sync.Mutex
	stats := map[string]int{}
	count := func(what string, err error) {
		statMu.Lock()
		defer statMu.Unlock()
		if err == nil {
			stats[what]++
		} else {
			stats[what+" failed"]++
		}
	}
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		go func(i int, m *world.Member) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(i)))
			for op := 0; op < 16; op++ {
				time.Sleep(time.Duration(r.IntN(80)) * time.Millisecond)
				cv, err := m.C.Conversation(w.Ctx, id)
				if err != nil {
					continue // not joined yet
				}
				info, err := cv.Info(w.Ctx)
				if err != nil || !info.Active {
					continue
				}
				var what string
				switch k := r.IntN(10); {
				case k < 6:
					what = "send"
					text := fmt.Sprintf("%s-%d", m.Name, op)
					if _, err = cv.Send(w.Ctx, []byte(text)); err == nil {
						msgs, _ := cv.Messages(w.Ctx, 0, 0)
						for _, msg := range msgs {
							if string(msg.Content) == text {
								sentMu.Lock()
								sent[text] = msg.Epoch
								sentMu.Unlock()
							}
						}
					}
				case k < 8:
					what, err = "update", cv.UpdateKeys(w.Ctx)
				case m.C.InboxID() == a1.C.InboxID() && k == 8:
					what, err = "remove", cv.RemoveMembers(w.Ctx, others[r.IntN(len(others))])
				case m.C.InboxID() == a1.C.InboxID():
					what, err = "add", cv.AddMembers(w.Ctx, others[r.IntN(len(others))])
				default:
					what, err = "update", cv.UpdateKeys(w.Ctx)
				}
				count(what, err)
				if err != nil && !expected(err) {
					t.Errorf("%s op %d: %v", m.Name, op, err)
				}
			}
		}(i, m)
	}
	wg.Wait()
	t.Logf("%d installations; operations: %v", len(ms), stats)
	if stats["update"]+stats["add"]+stats["remove"] < 3 {
		t.Errorf("only %v: too few commits to race", stats)
	}
	// Quiesce: everyone catches up and allows the conversation (an app's
	// user accepting it; the log is read only then, FORK-030), the creator
	// commits once more so every active member has a shared commit to
	// compare, and logs are exchanged.
	syncAll(ms...)
	for _, m := range ms {
		if cv, err := m.C.Conversation(w.Ctx, id); err == nil {
			if err := cv.SetConsent(w.Ctx, ports.ConsentAllowed); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := g.UpdateKeys(w.Ctx); err != nil {
		t.Fatal(err)
	}
	syncAll(ms...)
	var active []*world.Member
	for _, m := range ms {
		if cv, err := m.C.Conversation(w.Ctx, id); err == nil {
			if info, _ := cv.Info(w.Ctx); info.Active {
				active = append(active, m)
			}
		}
	}
	world.Agree(t, id, active...)
	for _, m := range active {
		st, err := m.Conv(id).ForkState(w.Ctx)
		if err != nil || st.State != ports.ForkNotForked || st.MaybeForked {
			t.Errorf("%s: fork state %+v, %v; want not forked", m.Name, st, err)
		}
		joinMu.Lock()
		joined := joinEpoch[m.Name] // the creator's is 0
		joinMu.Unlock()
		have := map[string]bool{}
		for _, s := range texts(t, m, id) {
			have[s] = true
		}
		// A member active at the end has been one since its newest join: a
		// removal ends the membership, a re-add starts a new one.
		for text, epoch := range sent {
			if epoch >= joined && !have[text] {
				t.Errorf("%s (joined at epoch %d) misses %q sent at epoch %d", m.Name, joined, text, epoch)
			}
		}
	}
	for _, m := range ms {
		m.Close()
	}
	readers.Wait()
	t.Logf("%d commits lost a race", len(raced))
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
