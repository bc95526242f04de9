package join_test

import (
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/join"
)

// flood publishes n Welcomes to j sealed to wrapper keys j never held:
// what anyone who read j's key package can send for the price of a seal.
func (a *inst) flood(j *inst, n int) []uint64 {
	a.w.t.Helper()
	ad := a.newGroup(groupSpec{}).add(addSpec{}, j)
	r := ad.recipients[0]
	wr, _ := a.reg.Wrapper(r.Wrapper)
	var seqs []uint64
	for i := 0; i < n; i++ {
		r.WrapperPublicKey, _, _ = wr.GenerateKey(a.w.ctx)
		seqs = append(seqs, a.publish(a.inline(r, r.Wrapper, r.Wrapper, ad.welcome, meta(ad.anchor)))[0])
	}
	return seqs
}

func (in *inst) heldCount() int {
	in.w.t.Helper()
	hs, err := in.rcv.Held(in.w.ctx)
	if err != nil {
		in.w.t.Fatal(err)
	}
	return len(hs)
}

// destroyed returns how many of the installation's key packages have
// their private keys destroyed.
func (in *inst) destroyed() int {
	n := 0
	for _, r := range in.records() {
		if !r.DestroyedAt.IsZero() {
			n++
		}
	}
	return n
}

// JOIN-074, JOIN-018, JOIN-084, COMP-253: under a flood of Welcomes no key
// package of the installation opens, the held queue stays bounded, each
// flooded Welcome ends on JOIN-087's 1-day clock, and the superseded key
// package is destroyed when its day is over; a flood that goes on delays
// the destruction only until the day after its last Welcome.
func TestJOIN074_KeysDestroyedOnTimeUnderAFlood(t *testing.T) {
	w := newWorld(t, "sqlite")
	a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{})
	if _, err := j.mgr.Rotate(w.ctx); err != nil { // the first package is superseded now: due in 1 day
		t.Fatal(err)
	}
	a.flood(j, 2*join.DefaultMaxHeldPerSender)
	j.process()
	if n := j.heldCount(); n > join.DefaultMaxHeldPerSender {
		t.Fatalf("%d flooded Welcomes held, want at most %d", n, join.DefaultMaxHeldPerSender)
	}
	// The client's periodic work: the key-package tick, then the welcome
	// passes, every 6 hours here.
	tick := func() {
		if err := j.mgr.Tick(w.ctx); err != nil {
			t.Fatal(err)
		}
		j.process()
		j.retry()
		if _, err := j.mgr.DestroySuperseded(w.ctx); err != nil {
			t.Fatal(err)
		}
	}
	for w.clock.Now().Before(t0.Add(24 * time.Hour)) {
		w.clock.Advance(6 * time.Hour)
		if w.clock.Now().Before(t0.Add(24*time.Hour)) && j.destroyed() != 0 {
			t.Fatalf("keys destroyed at %v, before their day was over", w.clock.Now())
		}
		tick()
	}
	if d := j.destroyed(); d != 1 || j.heldCount() != 0 {
		t.Fatalf("at the end of the day: %d packages destroyed, %d Welcomes held; want 1 and 0", d, j.heldCount())
	}
	// A second rotation and a flood that goes on for 18 hours: the keys go
	// 1 day after its last Welcome, not never.
	if _, err := j.mgr.Rotate(w.ctx); err != nil {
		t.Fatal(err)
	}
	start := w.clock.Now()
	var last time.Time
	for i := 0; i < 4; i++ {
		a.flood(j, 3)
		last = w.clock.Now()
		tick()
		w.clock.Advance(6 * time.Hour)
	}
	for j.destroyed() != 2 {
		if w.clock.Now().After(last.Add(30 * time.Hour)) {
			t.Fatalf("the superseded keys outlived the flood's last Welcome (%v) by more than a day and a tick", last)
		}
		tick()
		w.clock.Advance(6 * time.Hour)
	}
	if now := w.clock.Now(); now.Before(start.Add(24 * time.Hour)) {
		t.Fatalf("destroyed at %v, less than a day after the rotation at %v", now, start)
	}
}

// COMP-253, PROC-020: the held queue is bounded per sender class and in
// all. A stranger's Welcomes held for an upgrade (JOIN-057) count against
// its own inbox, a flood of Welcomes no key opens against the class of
// the unattributed, and when the queue is full the oldest Welcome of the
// largest class goes: an honest Welcome held before the flood stays.
func TestCOMP253_HeldQueueBoundedPerSender(t *testing.T) {
	w := newWorld(t, "sqlite")
	a, s := w.newInst("adder", instOptions{}), w.newInst("stranger", instOptions{})
	j := w.newInst("joiner", instOptions{MaxHeld: 6, MaxHeldPerSender: 3})
	_, honest := a.newGroup(groupSpec{edit: laterVersion}).join(j, addSpec{})
	var stranger []uint64
	for i := 0; i < 5; i++ {
		_, seq := s.newGroup(groupSpec{edit: laterVersion}).join(j, addSpec{})
		stranger = append(stranger, seq)
	}
	check := func() {
		t.Helper()
		j.want(honest, "held JOIN-057")
		for i, seq := range stranger {
			if i < 2 {
				j.want(seq, "rejected PROC-020")
			} else {
				j.want(seq, "held JOIN-057")
			}
		}
	}
	// 6 held fit the queue; the stranger's class does not fit its bound.
	j.process()
	check()
	flooded := s.flood(j, 10)
	j.process()
	check()
	held := 0
	for _, seq := range flooded {
		if j.state(seq) == "held JOIN-084" {
			held++
		}
	}
	if held != 2 || j.heldCount() != 6 {
		t.Fatalf("%d flooded Welcomes held, %d in all; want 2 and 6", held, j.heldCount())
	}
	j.want(flooded[len(flooded)-1], "held JOIN-084")
}
