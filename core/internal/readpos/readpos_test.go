package readpos

import "testing"

// serve runs passes of a reader over topic (ids in order, true when the
// reader authenticates the envelope) with pages of size n, and returns
// the ids each pass was served.
func pass(t *Tracker, durable uint64, topic []uint64, auth map[uint64]bool, n int) (served []uint64, p *Pass) {
	p = t.Start("topic", durable)
	for {
		var page []uint64
		for _, id := range topic {
			if id > p.Pos() && len(page) < n {
				page = append(page, id)
			}
		}
		for _, id := range page {
			p.Read(id, auth[id])
		}
		served = append(served, page...)
		if !p.EndPage(len(page) > 0) {
			return served, p
		}
	}
}

// TestCOMP240_DurableMovesOnlyOverAuthenticated: junk at the end of a
// topic does not move the durable position; junk below an authenticated
// envelope does.
func TestCOMP240_DurableMovesOnlyOverAuthenticated(t *testing.T) {
	var tr Tracker
	topic := []uint64{5, 6, 7, 1 << 62}
	_, p := pass(&tr, 4, topic, map[uint64]bool{6: true}, 10)
	if p.Durable() != 6 {
		t.Fatalf("durable %d, want 6 (the last authenticated envelope)", p.Durable())
	}
}

// TestCOMP240_HonestBelowJunkIsRead: an honest envelope that arrives with
// an id below a junk run is served by the next pass, and the pass then
// jumps over the run instead of reading it again.
func TestCOMP240_HonestBelowJunkIsRead(t *testing.T) {
	var tr Tracker
	var topic []uint64
	for i := uint64(0); i < 300; i++ {
		topic = append(topic, 1000+i)
	}
	served, p := pass(&tr, 10, topic, nil, 50)
	if len(served) != 300 || p.Durable() != 10 {
		t.Fatalf("first pass served %d, durable %d", len(served), p.Durable())
	}
	topic = append([]uint64{11}, topic...)
	served, p = pass(&tr, 10, topic, map[uint64]bool{11: true}, 50)
	if served[0] != 11 || p.Durable() != 11 {
		t.Fatalf("the honest envelope was not read first: %v, durable %d", served[:3], p.Durable())
	}
	if len(served) > 50 {
		t.Fatalf("the pass read %d envelopes: the junk run was read again past its first page", len(served))
	}
}

// TestCOMP240_BudgetEndsAPass: a pass reads at most Budget envelopes of
// new junk; the next goes on from there.
func TestCOMP240_BudgetEndsAPass(t *testing.T) {
	var tr Tracker
	var topic []uint64
	for i := uint64(1); i <= 3*Budget; i++ {
		topic = append(topic, i)
	}
	total := 0
	for i := 0; i < 4; i++ {
		served, _ := pass(&tr, 0, topic, nil, 100)
		if len(served) > Budget+2*100 {
			t.Fatalf("pass %d read %d envelopes", i, len(served))
		}
		total += len(served)
	}
	if _, p := pass(&tr, 0, topic, nil, 100); p.Pos() != 3*Budget {
		t.Fatalf("after five passes the read position is %d, want %d", p.Pos(), 3*Budget)
	}
}

// TestCOMP242_ReplacedJunkIsReadAgain: an envelope the delivery service
// now serves, inside a remembered junk run, at an id where it served junk
// before is not known junk: reading it forgets the run, so the pass does
// not jump over what replaced the junk.
func TestCOMP242_ReplacedJunkIsReadAgain(t *testing.T) {
	var tr Tracker
	junk, honest := [32]byte{1}, [32]byte{2}
	p := tr.Start("topic", 10)
	for id := uint64(11); id <= 20; id++ {
		p.ReadSum(id, false, junk)
	}
	p.End()
	p = tr.Start("topic", 10)
	if !p.Known(11, junk) || p.Known(11, honest) {
		t.Fatal("Known does not tell the junk read before from what replaced it")
	}
	p.ReadSum(11, false, honest)
	p.EndPage(true)
	if p.Pos() != 11 {
		t.Fatalf("the pass jumped to %d over a run whose content changed", p.Pos())
	}
}
