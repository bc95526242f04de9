package join_test

import (
	"testing"
)

// offline adds j to n groups while it does not read, then runs one
// welcome pass, and returns the Welcomes' sequence ids.
func offline(a, j *inst, n int) []uint64 {
	seqs := make([]uint64, n)
	for i := range seqs {
		_, seqs[i] = a.newGroup(groupSpec{}).join(j, addSpec{})
	}
	return seqs
}

// COMP-253, COMP-162: Welcomes are attempted as they are read and only
// those that cannot be completed count against the held bound, so a user
// who was offline while more groups added it than the bound holds joins
// every one of them. The bound is 8 here; BenchmarkOfflineWelcomes runs
// 300 Welcomes at the default bound of 256.
func TestCOMP253_OfflineUserJoinsEveryWaitingWelcome(t *testing.T) {
	w := newWorld(t, "sqlite")
	a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{MaxHeld: 8})
	seqs := offline(a, j, 30)
	j.process()
	for _, seq := range seqs {
		j.want(seq, "joined")
	}
	if rej, _ := j.rcv.Rejected(w.ctx); len(rej) != 0 {
		t.Fatalf("%d Welcomes rejected, first %+v", len(rej), rej[0])
	}
}
