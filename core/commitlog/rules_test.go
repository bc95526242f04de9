package commitlog

import (
	"testing"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

func remoteE(cs, epoch uint64, last, applied string, res ports.CommitResult) ports.RemoteCommitLogEntry {
	return ports.RemoteCommitLogEntry{CommitSequenceID: cs, AppliedEpochNumber: epoch, CommitResult: res,
		LastEpochAuthenticator: []byte(last), AppliedEpochAuthenticator: []byte(applied)}
}

func cand(cs, epoch uint64, last, applied string, res contentspb.CommitResult) *contentspb.PlaintextCommitLogEntry {
	return &contentspb.PlaintextCommitLogEntry{CommitSequenceId: cs, AppliedEpochNumber: epoch, CommitResult: res,
		LastEpochAuthenticator: []byte(last), AppliedEpochAuthenticator: []byte(applied)}
}

const (
	applied  = contentspb.CommitResult_COMMIT_RESULT_APPLIED
	rejected = contentspb.CommitResult_COMMIT_RESULT_WRONG_EPOCH
)

// FORK-083: the chain table, and the two exceptions where only the first
// row applies.
func TestFORK083_ChainTable(t *testing.T) {
	last := remoteE(10, 4, "a3", "a4", ports.CommitResultApplied)
	pub := Tenure{LastAuthorIsPublisher: true}
	cases := []struct {
		name string
		e    *contentspb.PlaintextCommitLogEntry
		t    Tenure
		ok   bool
	}{
		{"applied continues", cand(11, 5, "a4", "a5", applied), pub, true},
		{"same commit again", cand(10, 5, "a4", "a5", applied), pub, false},
		{"older commit (out of order)", cand(9, 5, "a4", "a5", applied), pub, false},
		{"applied from another authenticator", cand(11, 5, "zz", "a5", applied), pub, false},
		{"applied skips an epoch", cand(11, 6, "a4", "a6", applied), pub, false},
		{"applied keeps the epoch", cand(11, 4, "a4", "a5", applied), pub, false},
		{"rejection keeps state", cand(11, 4, "a4", "a4", rejected), pub, true},
		{"rejection changes epoch", cand(11, 5, "a4", "a4", rejected), pub, false},
		{"rejection changes authenticator", cand(11, 4, "a4", "x", rejected), pub, false},
		{"last author lost the role: new chain", cand(11, 9, "q", "r", applied), Tenure{}, true},
		{"last author lost the role: still increasing", cand(10, 9, "q", "r", applied), Tenure{}, false},
		{"last author returned (boundary 12): candidate at boundary restarts", cand(12, 9, "q", "r", applied), Tenure{true, 12}, true},
		{"last author returned: candidate before boundary chains", cand(11, 9, "q", "r", applied), Tenure{true, 12}, false},
		{"boundary not after last entry: full chain", cand(12, 9, "q", "r", applied), Tenure{true, 10}, false},
	}
	for _, c := range cases {
		got := CheckChain(&last, c.e, c.t) == ""
		if got != c.ok {
			t.Errorf("%s: accepted=%v, want %v", c.name, got, c.ok)
		}
	}
	// An applied entry after a last entry with an empty authenticator
	// checks only the epoch.
	empty := remoteE(3, 1, "", "", ports.CommitResultApplied)
	if CheckChain(&empty, cand(4, 2, "any", "b", applied), pub) != "" {
		t.Error("empty last authenticator should not be compared")
	}
	if CheckChain(nil, cand(4, 2, "any", "b", applied), pub) != "" {
		t.Error("first entry must be accepted")
	}
}

func localE(cs uint64, membership uint64, applied string, removed bool) ports.LocalCommitLogEntry {
	return ports.LocalCommitLogEntry{CommitSequenceID: cs, Membership: membership, CommitResult: ports.CommitResultApplied,
		AppliedEpochAuthenticator: []byte(applied), RemovedThisInstallation: removed}
}

// FORK-082: the exhaustive table of section 5.
func TestFORK082_ForkStateTable(t *testing.T) {
	r := func(cs uint64, a string) ports.RemoteCommitLogEntry {
		return ports.RemoteCommitLogEntry{CommitSequenceID: cs, AppliedEpochAuthenticator: []byte(a)}
	}
	cases := []struct {
		name   string
		local  []ports.LocalCommitLogEntry
		remote []ports.RemoteCommitLogEntry
		want   ports.ForkState
	}{
		{"no entries", nil, nil, ports.ForkUnknown},
		{"no shared commit", []ports.LocalCommitLogEntry{localE(5, 1, "x", false)}, []ports.RemoteCommitLogEntry{r(4, "x")}, ports.ForkUnknown},
		{"shared equal, nothing newer", []ports.LocalCommitLogEntry{localE(4, 1, "x", false)}, []ports.RemoteCommitLogEntry{r(4, "x")}, ports.ForkNotForked},
		{"shared differs", []ports.LocalCommitLogEntry{localE(4, 1, "x", false)}, []ports.RemoteCommitLogEntry{r(4, "y")}, ports.ForkForked},
		{"shared equal, newer local", []ports.LocalCommitLogEntry{localE(4, 1, "x", false), localE(6, 1, "z", false)}, []ports.RemoteCommitLogEntry{r(4, "x")}, ports.ForkUnknown},
		{"newest shared decides, older differs", []ports.LocalCommitLogEntry{localE(4, 1, "x", false), localE(6, 1, "z", false)}, []ports.RemoteCommitLogEntry{r(4, "q"), r(6, "z")}, ports.ForkNotForked},
		{"newest shared differs, older agrees", []ports.LocalCommitLogEntry{localE(4, 1, "x", false), localE(6, 1, "z", false)}, []ports.RemoteCommitLogEntry{r(4, "x"), r(6, "w")}, ports.ForkForked},
		{"earlier membership ignored", []ports.LocalCommitLogEntry{localE(4, 0, "x", false)}, []ports.RemoteCommitLogEntry{r(4, "y")}, ports.ForkUnknown},
		{"removal entry ignored", []ports.LocalCommitLogEntry{localE(4, 1, "x", false), localE(5, 1, "q", true)}, []ports.RemoteCommitLogEntry{r(4, "x"), r(5, "z")}, ports.ForkNotForked},
		{"newer removal entry does not leave it open", []ports.LocalCommitLogEntry{localE(4, 1, "x", false), localE(5, 1, "q", true)}, []ports.RemoteCommitLogEntry{r(4, "x")}, ports.ForkNotForked},
	}
	for _, c := range cases {
		if got, _ := EvaluateForkState(c.local, c.remote, 1); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// FORK-041: forked is sticky whatever is computed.
func TestFORK041_ForkedIsSticky(t *testing.T) {
	for _, c := range []ports.ForkState{ports.ForkUnknown, ports.ForkNotForked, ports.ForkForked} {
		if NextForkState(ports.ForkForked, c) != ports.ForkForked {
			t.Fatalf("forked replaced by %v", c)
		}
		if NextForkState(ports.ForkUnknown, c) != c {
			t.Fatalf("unknown not replaced by %v", c)
		}
	}
}

func legacyE(seq, cs uint64, res ports.CommitResult, epoch uint64, last, applied string) ports.LocalCommitLogEntry {
	return ports.LocalCommitLogEntry{Seq: seq, CommitSequenceID: cs, CommitResult: res, AppliedEpochNumber: epoch,
		LastEpochAuthenticator: []byte(last), AppliedEpochAuthenticator: []byte(applied), Legacy: true, RoleEvidence: true}
}

// FORK-086: the connected-suffix state-proof table.
func TestFORK086_ConnectedSuffixTable(t *testing.T) {
	A := ports.CommitResultApplied
	W := ports.CommitResultWrongEpoch
	chain := []ports.LocalCommitLogEntry{
		legacyE(1, 3, A, 1, "e0", "e1"),
		legacyE(2, 4, A, 2, "e1", "e2"),
		legacyE(3, 5, W, 2, "e2", "e2"),
		legacyE(4, 6, A, 3, "e2", "e3"),
	}
	removal := legacyE(2, 4, A, 1, "e1", "e1")
	removal.RemovedThisInstallation = true
	marker := legacyE(1, 0, A, 1, "", "e1")
	cases := []struct {
		name    string
		entries []ports.LocalCommitLogEntry
		epoch   uint64
		auth    string
		start   int
	}{
		{"whole history connects", chain, 3, "e3", 0},
		{"current state unknown to the log", chain, 3, "zz", 4},
		{"gap: a missing transition stops the walk", []ports.LocalCommitLogEntry{chain[0], chain[3]}, 3, "e3", 1},
		{"rejected entry must keep the state", []ports.LocalCommitLogEntry{chain[0], chain[1], legacyE(3, 5, W, 2, "e2", "x"), chain[3]}, 3, "e3", 3},
		{"removal entry stops the suffix", []ports.LocalCommitLogEntry{chain[0], removal, legacyE(3, 5, A, 2, "e1", "e2")}, 2, "e2", 2},
		{"zero-sequence marker stops and is not included", []ports.LocalCommitLogEntry{marker, legacyE(2, 5, A, 2, "e1", "e2")}, 2, "e2", 1},
		{"epoch 0 cannot be applied", []ports.LocalCommitLogEntry{legacyE(1, 2, A, 0, "x", "e0")}, 0, "e0", 1},
	}
	for _, c := range cases {
		if got := ConnectedSuffix(c.entries, c.epoch, []byte(c.auth)); got != c.start {
			t.Errorf("%s: start %d, want %d", c.name, got, c.start)
		}
	}
}

// FORK-086: the legacy recovery boundary table.
func TestFORK086_LegacyBoundaryTable(t *testing.T) {
	A := ports.CommitResultApplied
	base := func() []ports.LocalCommitLogEntry {
		return []ports.LocalCommitLogEntry{
			legacyE(1, 3, A, 1, "e0", "e1"),
			legacyE(2, 4, A, 2, "e1", "e2"),
			legacyE(3, 5, A, 3, "e2", "e3"),
			legacyE(4, 6, A, 4, "e3", "e4"),
		}
	}
	es := base()
	if got := LegacyBoundary(es, 1, false, "me"); got != 1 {
		t.Errorf("group with no role commit: %d, want the suffix start 1", got)
	}
	es = base()
	es[2].AddedSuperAdmins = []string{"me"}
	if got := LegacyBoundary(es, 0, false, "me"); got != 2 {
		t.Errorf("retained promotion: %d, want 2", got)
	}
	if got := LegacyBoundary(es, 0, true, "me"); got != 0 {
		t.Errorf("DM: %d, want the suffix start", got)
	}
	es[1].RoleEvidence, es[1].ChangeClass = false, ports.ChangeMembership
	es[3].RoleEvidence, es[3].ChangeClass = false, ports.ChangeUnknown
	if got := LegacyBoundary(es, 0, false, "me"); got != 3 {
		t.Errorf("unresolved role commit after the promotion: %d, want 3", got)
	}
	es[3].ChangeClass = ports.ChangeKeyUpdate
	if got := LegacyBoundary(es, 0, false, "me"); got != 2 {
		t.Errorf("key update is not a role commit: %d, want 2", got)
	}
	es[2].AddedSuperAdmins = []string{"someone else"}
	if got := LegacyBoundary(es, 0, false, "me"); got != 1 {
		t.Errorf("another inbox's promotion: %d, want the unresolved commit 1", got)
	}
	if got := LegacyBoundary(es, 4, false, "me"); got != 4 {
		t.Errorf("empty suffix: %d", got)
	}
}

// FORK-086: the connected-suffix walk checks a rejected entry's
// last_epoch_authenticator as well as its applied one, and a
// zero-sequence marker anywhere in the history stops the walk.
func TestFORK086_ConnectedSuffixRejectedAndMarker(t *testing.T) {
	A := ports.CommitResultApplied
	W := ports.CommitResultWrongEpoch
	cases := []struct {
		name    string
		entries []ports.LocalCommitLogEntry
		epoch   uint64
		auth    string
		start   int
	}{
		{"rejected entry from another authenticator stops", []ports.LocalCommitLogEntry{
			legacyE(1, 3, A, 1, "e0", "e1"), legacyE(2, 4, A, 2, "e1", "e2"), legacyE(3, 5, W, 2, "x", "e2"), legacyE(4, 6, A, 3, "e2", "e3"),
		}, 3, "e3", 3},
		{"marker in the middle stops, the earlier prefix stays unproved", []ports.LocalCommitLogEntry{
			legacyE(1, 3, A, 1, "e0", "e1"), legacyE(2, 0, A, 1, "", "e1"), legacyE(3, 5, A, 2, "e1", "e2"),
		}, 2, "e2", 2},
		{"marker whose state does not match stops too", []ports.LocalCommitLogEntry{
			legacyE(1, 3, A, 1, "e0", "e1"), legacyE(2, 0, A, 7, "", "zz"), legacyE(3, 5, A, 2, "e1", "e2"),
		}, 2, "e2", 2},
	}
	for _, c := range cases {
		if got := ConnectedSuffix(c.entries, c.epoch, []byte(c.auth)); got != c.start {
			t.Errorf("%s: start %d, want %d", c.name, got, c.start)
		}
	}
}

// FORK-086: a rejected commit never changes the role, and a commit
// confined to non-role metadata or a key update is no role commit, even
// without retained evidence; membership and permission changes and absent
// classifications without evidence are.
func TestFORK086_WhatCountsAsARoleCommit(t *testing.T) {
	A := ports.CommitResultApplied
	W := ports.CommitResultWrongEpoch
	entry := func(res ports.CommitResult, class ports.ChangeClass) []ports.LocalCommitLogEntry {
		es := []ports.LocalCommitLogEntry{
			legacyE(1, 3, A, 1, "e0", "e1"),
			legacyE(2, 4, res, 1, "e1", "e1"),
			legacyE(3, 5, A, 2, "e1", "e2"),
		}
		if res == A {
			es[1] = legacyE(2, 4, A, 2, "e1", "e2")
			es[2] = legacyE(3, 5, A, 3, "e2", "e3")
		}
		es[1].RoleEvidence, es[1].ChangeClass = false, class
		return es
	}
	for _, c := range []struct {
		name  string
		res   ports.CommitResult
		class ports.ChangeClass
		want  int
	}{
		{"rejected, unclassified", W, ports.ChangeUnknown, 0},
		{"rejected, membership", W, ports.ChangeMembership, 0},
		{"applied, metadata only", A, ports.ChangeMetadata, 0},
		{"applied, key update", A, ports.ChangeKeyUpdate, 0},
		{"applied, membership", A, ports.ChangeMembership, 1},
		{"applied, permissions", A, ports.ChangePermissions, 1},
		{"applied, unclassified", A, ports.ChangeUnknown, 1},
	} {
		if got := LegacyBoundary(entry(c.res, c.class), 0, false, "me"); got != c.want {
			t.Errorf("%s: boundary %d, want %d", c.name, got, c.want)
		}
	}
}
