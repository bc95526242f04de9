package mlstest_test

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/ports/mlstest"
)

// envBreak selects the rule TestBrokenTarget's engine or store breaks.
const envBreak = "REGROUP_MLSTEST_BREAK"

// mutations pairs each deliberately broken rule with the cases that must
// fail because of it.
var mutations = []struct {
	breaks string
	cases  []string
}{
	{"wrong-epoch-as-invalid", []string{"FORK-073/OlderEpochCommitIsWrongEpochOlder", "FORK-073/FutureEpochMessageIsWrongEpochFuture"}},
	{"future-as-older", []string{"FORK-073/FutureEpochMessageIsWrongEpochFuture"}},
	{"epoch-numbers-swapped", []string{"FORK-073/OlderEpochCommitIsWrongEpochOlder"}},
	{"undecryptable-as-invalid", []string{"Process/GarbledPrivateMessageIsUndecryptable", "Process/MessageOfForkedGroupIsUndecryptable"}},
	{"invalid-as-undecryptable", []string{"Process/BadMembershipTagIsInvalid"}},
	{"two-classes", []string{"Process/GarbageNeverPanicsAndChangesNothing"}},
	{"panic-on-short", []string{"Process/GarbageNeverPanicsAndChangesNothing"}},
	{"advance-on-error", []string{"FORK-073/OlderEpochCommitIsWrongEpochOlder", "Process/BadMembershipTagIsInvalid", "Process/GarbageNeverPanicsAndChangesNothing"}},
	{"not-found-unclassified", []string{"Process/UnknownGroupIsGroupNotFound"}},
	{"commit-on-error", []string{"JOIN-046/FailedTxLeavesNoGroup", "JOIN-046/FailedTxLeavesNoMergedCommit",
		"JOIN-046/FailedTxLeavesNoProcessedCommit", "JOIN-046/FailedTxLeavesNoInstalledWelcome"}},
	{"forget-on-reopen", []string{"Restart/PendingCommitMergedAfterRestart", "Restart/StagedCommitMergedAfterRestart", "Restart/JoinedMemberContinuesAfterRestart"}},
	{"clear-keeps-pending", []string{"Restart/PendingCommitClearedAfterRestart"}},
	{"always-active", []string{"Lifecycle/TwoMembersAgreeAtEveryEpoch"}},
	{"drop-force-path", []string{"Lifecycle/ForcePathAddsUpdatePath"}},
	{"export-per-installation", []string{"Lifecycle/ThreeMembersAgreeAtEveryEpoch"}},
	{"stage-installs", []string{"Lifecycle/TwoMembersAgreeAtEveryEpoch"}},
	{"stage-any-key-package", []string{"Lifecycle/WelcomeNeedsItsKeyPackage"}},
	{"no-lifetime-check", []string{"JOIN-008/ExpiredKeyPackageFailsOnlyWithNow"}},
	{"lifetime-always-checked", []string{"JOIN-008/ExpiredKeyPackageFailsOnlyWithNow"}},
	{"accept-tampered", []string{"JOIN-007/TamperedKeyPackageFails"}},
	{"keep-more-epochs", []string{"PastEpochs/LateMessageBeyondWindowIsWrongEpoch"}},
	{"keep-fewer-epochs", []string{"PastEpochs/LateMessageWithinWindowDecrypts", "PastEpochs/PastEpochKeysSurviveRestart"}},
	{"replay-accepted", []string{"Process/ReplayedApplicationMessageIsUndecryptable"}},
	{"forget-past-epochs-on-reopen", []string{"PastEpochs/PastEpochKeysSurviveRestart"}},
	{"sender-from-current-tree", []string{"PastEpochs/LateMessageNamesItsSenderOfThatEpoch"}},
	{"own-commit-invalid", []string{"Own/OwnCommitReadBackIsStagedAndMerged", "Restart/PendingCommitRepublishedAfterRestart"}},
	{"own-commit-not-equal", []string{"FORK-073/OwnCommitWithoutPendingIsWrongEpochEqual"}},
	{"readd-invalid", []string{"FORK-062/ReaddCommitRemovesSelf"}},
	{"stale-handle-rolls-back", []string{"Welcome/StaleHandleCannotRollBack"}},
	{"keep-sibling-handles", []string{"Welcome/InstallDeletesSiblingHandles"}},
	{"install-replaces-silently", []string{"FORK-062/ReaddCommitRemovesSelf"}},
	{"merge-any-staged", []string{"Process/MergeStagedMergesOnlyTheLastProcess"}},
	{"create-overwrites", []string{"CreateGroup/ExistingGroupIsAlreadyExists"}},
	{"inactive-unclassified", []string{"Inactive/ProcessAfterRemovalHasOneClass"}},
	{"forget-removal", []string{"FORK-062/ReaddCommitRemovesSelf", "Inactive/ProcessAfterRemovalHasOneClass"}},
	{"no-message-epoch", []string{"Process/LateMessageReportsItsEpoch"}},
	{"unsupported-as-invalid", []string{"JOIN-087/UnsupportedWelcomeIsErrUnsupported"}},
	{"members-bare", []string{"Members/CarryCredentialCapabilitiesAndKeys"}},
	{"no-proposals", []string{"Process/CommitReportsItsProposals", "FORK-062/ReaddCommitRemovesSelf"}},
	{"pending-commit-lost", []string{"Restart/PendingCommitRepublishedAfterRestart"}},
	{"external-sender-as-member", []string{"External/GroupInfoAndExternalCommit"}},
	{"no-process-error", []string{"FORK-073/OlderEpochCommitIsWrongEpochOlder", "FORK-073/FutureEpochMessageIsWrongEpochFuture"}},
	{"expire-everything", []string{"Welcome/ListDiscardExpireAndViewAfterRestart"}},
	{"ratchet-step-kept", []string{"JOIN-046/FailedTxLeavesNoRatchetStep"}},
}

// TestSuitePassesRealEngine is the baseline of the mutation test: with
// nothing broken, every case passes, so the failures the mutation test
// requires come from the rule it breaks.
func TestSuitePassesRealEngine(t *testing.T) {
	mlstest.Run(t, func(t *testing.T) mlstest.Harness {
		return &brokenHarness{dir: t.TempDir(), opens: map[string]int{}, engines: map[string]int{}}
	})
}

// TestSuiteCatchesBrokenEngines runs the suite, in a child process, on the
// real engine and SQLite stores with one rule deliberately broken, and
// checks that each case named after that rule fails: the suite's cases are
// not vacuous.
func TestSuiteCatchesBrokenEngines(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the suite in child processes")
	}
	for _, m := range mutations {
		t.Run(m.breaks, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run="+runPattern(m.cases), "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), envBreak+"="+m.breaks)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Errorf("with %s broken the suite passed:\n%s", m.breaks, out)
			}
			for _, c := range m.cases {
				if !bytes.Contains(out, []byte("--- FAIL: TestBrokenTarget/"+c+" ")) {
					t.Errorf("with %s broken, case %s did not fail:\n%s", m.breaks, c, out)
				}
			}
		})
	}
}

// runPattern selects the named two-level cases of TestBrokenTarget (and
// perhaps a few more: the levels are matched one by one).
func runPattern(cases []string) string {
	var groups, names []string
	for _, c := range cases {
		g, n, _ := strings.Cut(c, "/")
		groups, names = append(groups, regexp.QuoteMeta(g)), append(names, regexp.QuoteMeta(n))
	}
	return "^TestBrokenTarget$/^(" + strings.Join(groups, "|") + ")$/^(" + strings.Join(names, "|") + ")$"
}
