package client

import (
	"bytes"
	"testing"
)

// COMP-495: the merged-commit log keeps the newest 32 commits within
// 1 MiB (the newest always), oldest first, and reads back what it wrote.
func TestCOMP495_MergedLogBounds(t *testing.T) {
	var log []mergedCommit
	for e := uint64(1); e <= 40; e++ {
		log = trimMerged(append(log, mergedCommit{epoch: e, commit: []byte{byte(e)}}))
	}
	if len(log) != maxMergedCommits || log[0].epoch != 40-maxMergedCommits+1 || log[len(log)-1].epoch != 40 {
		t.Fatalf("log of %d entries, epochs %d..%d; want the newest %d", len(log), log[0].epoch, log[len(log)-1].epoch, maxMergedCommits)
	}
	back := decodeMerged(encodeMerged(log))
	if len(back) != len(log) {
		t.Fatalf("read back %d entries of %d", len(back), len(log))
	}
	for i := range log {
		if back[i].epoch != log[i].epoch || !bytes.Equal(back[i].commit, log[i].commit) {
			t.Fatalf("entry %d read back as %+v, wrote %+v", i, back[i], log[i])
		}
	}
	big := make([]byte, maxMergedBytes/2+1)
	log = trimMerged(append(log, mergedCommit{epoch: 41, commit: big}, mergedCommit{epoch: 42, commit: big}))
	if len(log) != 1 || log[0].epoch != 42 {
		t.Fatalf("after two commits of half the budget: %d entries; want the newest alone", len(log))
	}
	huge := make([]byte, maxMergedBytes+1)
	if log = trimMerged(append(log, mergedCommit{epoch: 43, commit: huge})); len(log) != 1 || log[0].epoch != 43 {
		t.Fatalf("a commit above the budget: %d entries; want it kept alone", len(log))
	}
}

// The merged-commit log is local, but a damaged blob must not panic.
func FuzzDecodeMerged(f *testing.F) {
	f.Add(encodeMerged([]mergedCommit{{epoch: 3, commit: []byte("commit")}}))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, c := range decodeMerged(b) {
			_ = c
		}
	})
}
