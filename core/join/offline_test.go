package join_test

import (
	"testing"
)

// COMP-253: Welcomes are attempted as they are read and only those that
// cannot be completed count against the held bound, so a user who was
// offline while many groups added it joins every one of them: here 300,
// more than DefaultMaxHeld (256).
func TestCOMP253_OfflineUserJoinsEveryWaitingWelcome(t *testing.T) {
	n := 300
	w := newWorld(t, "sqlite")
	a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{})
	seqs := make([]uint64, n)
	for i := range seqs {
		_, seqs[i] = a.newGroup(groupSpec{}).join(j, addSpec{})
	}
	j.process()
	for _, seq := range seqs {
		j.want(seq, "joined")
	}
	if rej, _ := j.rcv.Rejected(w.ctx); len(rej) != 0 {
		t.Fatalf("%d Welcomes rejected, first %+v", len(rej), rej[0])
	}
}
