package commitlog

import (
	"bytes"

	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// Tenure is what FORK-083 needs about the author of the last accepted
// entry, judged against the reader's current ratchet tree (FORK-089).
type Tenure struct {
	// LastAuthorIsPublisher reports that the last accepted entry's author is
	// a publisher in the current ratchet tree.
	LastAuthorIsPublisher bool
	// LastAuthorBoundary is that author's publisher boundary.
	LastAuthorBoundary uint64
}

// CheckChain applies the chain table of FORK-083 to candidate e given the
// last accepted entry (nil when none). It returns "" when e continues the
// chain, or a description of the failed row. Only the first row applies
// when the last author is no longer a publisher, or when the last entry
// precedes that author's publisher boundary and e does not.
func CheckChain(last *ports.RemoteCommitLogEntry, e *contentspb.PlaintextCommitLogEntry, t Tenure) string {
	if last == nil {
		return ""
	}
	if e.GetCommitSequenceId() <= last.CommitSequenceID {
		return "commit_sequence_id does not increase"
	}
	if !t.LastAuthorIsPublisher {
		return ""
	}
	if last.CommitSequenceID < t.LastAuthorBoundary && e.GetCommitSequenceId() >= t.LastAuthorBoundary {
		return ""
	}
	if e.GetCommitResult() == contentspb.CommitResult_COMMIT_RESULT_APPLIED {
		if len(last.AppliedEpochAuthenticator) > 0 && !bytes.Equal(e.GetLastEpochAuthenticator(), last.AppliedEpochAuthenticator) {
			return "applied entry does not start from the last applied authenticator"
		}
		if e.GetAppliedEpochNumber() != last.AppliedEpochNumber+1 {
			return "applied entry does not advance the epoch by one"
		}
		return ""
	}
	if e.GetAppliedEpochNumber() != last.AppliedEpochNumber || !bytes.Equal(e.GetAppliedEpochAuthenticator(), last.AppliedEpochAuthenticator) {
		return "rejection changes the applied epoch or authenticator"
	}
	return ""
}

// Shared is the shared commit of section 5: the local entry and the
// accepted remote entry for the same commit.
type Shared struct {
	Local  ports.LocalCommitLogEntry
	Remote ports.RemoteCommitLogEntry
}

// EvaluateForkState applies the table of section 5 to the local entries
// and accepted remote entries of a conversation. Only local entries of
// the given membership count, and removal entries never do. It returns the
// state and the shared commit (nil when none exists).
func EvaluateForkState(local []ports.LocalCommitLogEntry, remote []ports.RemoteCommitLogEntry, membership uint64) (ports.ForkState, *Shared) {
	bySeq := make(map[uint64]ports.RemoteCommitLogEntry, len(remote))
	for _, r := range remote {
		if _, dup := bySeq[r.CommitSequenceID]; !dup {
			bySeq[r.CommitSequenceID] = r
		}
	}
	var shared *Shared
	var newest uint64
	for _, l := range local {
		if l.Membership != membership || l.RemovedThisInstallation {
			continue
		}
		newest = max(newest, l.CommitSequenceID)
		if r, ok := bySeq[l.CommitSequenceID]; ok && (shared == nil || l.CommitSequenceID > shared.Local.CommitSequenceID) {
			shared = &Shared{Local: l, Remote: r}
		}
	}
	switch {
	case shared == nil:
		return ports.ForkUnknown, nil
	case !bytes.Equal(shared.Local.AppliedEpochAuthenticator, shared.Remote.AppliedEpochAuthenticator):
		return ports.ForkForked, shared
	case newest > shared.Local.CommitSequenceID:
		return ports.ForkUnknown, shared
	}
	return ports.ForkNotForked, shared
}

// NextForkState is FORK-041: forked is kept whatever was computed.
func NextForkState(current, computed ports.ForkState) ports.ForkState {
	if current == ports.ForkForked {
		return ports.ForkForked
	}
	return computed
}

// ConnectedSuffix returns the index in entries (local recording order) at
// which the connected legacy suffix starts, walking backward from the
// current epoch and epoch authenticator under the connected-suffix
// state-proof table of FORK-086; len(entries) when the suffix is empty.
func ConnectedSuffix(entries []ports.LocalCommitLogEntry, epoch uint64, auth []byte) int {
	start := len(entries)
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		switch {
		case e.RemovedThisInstallation:
			return start
		case e.CommitSequenceID == 0:
			return start // a membership marker: never published, stops the walk
		case e.CommitResult == ports.CommitResultApplied:
			if e.AppliedEpochNumber != epoch || !bytes.Equal(e.AppliedEpochAuthenticator, auth) || epoch == 0 {
				return start
			}
			epoch, auth = epoch-1, e.LastEpochAuthenticator
		default:
			if e.AppliedEpochNumber != epoch || !bytes.Equal(e.LastEpochAuthenticator, auth) || !bytes.Equal(e.AppliedEpochAuthenticator, auth) {
				return start
			}
		}
		start = i
	}
	return start
}

// LegacyBoundary returns the index in entries of the legacy recovery
// boundary (FORK-086) for a suffix starting at start: the start for a DM or
// a group with no role commit, otherwise the retained own-inbox promotion
// or unresolved role commit with the greatest commit sequence id.
func LegacyBoundary(entries []ports.LocalCommitLogEntry, start int, dm bool, ownInbox string) int {
	if dm || start >= len(entries) {
		return start
	}
	boundary := start
	var best uint64
	found := false
	for i := start; i < len(entries); i++ {
		e := entries[i]
		if e.CommitResult != ports.CommitResultApplied {
			continue // a rejected commit does not change the role
		}
		if isPromotion(e, ownInbox) || isUnresolvedRoleCommit(e) {
			if !found || e.CommitSequenceID > best {
				boundary, best, found = i, e.CommitSequenceID, true
			}
		}
	}
	return boundary
}

func isPromotion(e ports.LocalCommitLogEntry, ownInbox string) bool {
	if !e.RoleEvidence {
		return false
	}
	for _, in := range e.AddedSuperAdmins {
		if in == ownInbox {
			return true
		}
	}
	return false
}

func isUnresolvedRoleCommit(e ports.LocalCommitLogEntry) bool {
	if e.RoleEvidence {
		return false
	}
	switch e.ChangeClass {
	case ports.ChangeKeyUpdate, ports.ChangeMetadata:
		return false
	}
	return true // membership, permissions, or absent/unrecognized
}
