package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/ports"
)

// recoverySettings are the CLI's fork recovery policy (FORK-070), saved
// in the home's config.json by init and overridden for one command by
// its flags. The defaults (COMP-340): ask to be readded to every
// conversation found forked, answer others' requests, and accept the
// repair of diverged epoch secrets.
type recoverySettings struct {
	// Recover is "all" (ask to be readded to every forked conversation)
	// or "none".
	Recover string `json:"recover"`
	// Respond publishes readd commits for others' requests (FORK-071).
	Respond bool `json:"respond"`
	// RepairDiverged lets the readder's Welcome replace this member's
	// state when its epoch secrets diverged (COMP-205); without it such
	// a member stays forked (COMP-208).
	RepairDiverged bool `json:"repair_diverged"`
}

// defaultRecovery is what a home saved without recovery settings (before
// they existed) and a new init use.
var defaultRecovery = recoverySettings{Recover: "all", Respond: true, RepairDiverged: true}

// optBool is a boolean flag that records whether the line set it.
type optBool struct{ set, v bool }

func (b *optBool) String() string   { return strconv.FormatBool(b != nil && b.v) }
func (b *optBool) IsBoolFlag() bool { return true }
func (b *optBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("%q is not true or false", s)
	}
	b.set, b.v = true, v
	return nil
}

// addRecoveryFlags adds the flags that override the saved policy.
func addRecoveryFlags(fs *flag.FlagSet, o *opts) {
	fs.StringVar(&o.recover, "recover", "", "fork recovery: `MODE` all (ask to be readded to every forked conversation) or none (default: saved by init, else all)")
	fs.Var(&o.respond, "respond", "answer other members' readd requests with readd commits (default: saved by init, else true)")
	fs.Var(&o.repairDiverged, "repair-diverged", "accept a readder's Welcome in place of a forked state whose epoch secrets diverged (default: saved by init, else true)")
}

// apply returns s with the flags of o that were set.
func (s recoverySettings) apply(o opts) (recoverySettings, error) {
	if o.recover != "" {
		if o.recover != "all" && o.recover != "none" {
			return s, usagef("--recover: %q is neither all nor none", o.recover)
		}
		s.Recover = o.recover
	}
	if o.respond.set {
		s.Respond = o.respond.v
	}
	if o.repairDiverged.set {
		s.RepairDiverged = o.repairDiverged.v
	}
	return s, nil
}

// policy is the client's recovery policy of s.
func (s recoverySettings) policy() client.RecoveryPolicy {
	p := client.RecoveryPolicy{Mode: client.RecoverAll, DisableResponses: !s.Respond, RepairDiverged: s.RepairDiverged}
	if s.Recover == "none" {
		p.Mode, p.RepairDiverged = client.RecoverNone, false // the repair answers this member's own request only
	}
	return p
}

// repairOutlook says what will happen to a conversation in state st under
// the policy, and when: the CLI runs only while a command runs, so every
// step happens at some member's next sync.
func (s recoverySettings) repairOutlook(st ports.ForkState, readd ports.ReaddStatus, logRead bool) string {
	switch {
	case !logRead:
		return "nothing: the commit log is read only for allowed conversations; `regroup read` allows this one"
	case st != ports.ForkForked:
		return ""
	case s.Recover == "none":
		return "nothing: recovery is off (--recover none), so no readd request is sent and this installation stays forked; " +
			"`regroup sync --recover all` asks to be readded"
	}
	var out string
	if readd.Requested {
		out = fmt.Sprintf("a readd request (after commit %d) is out; ", readd.RequestedAt)
	} else {
		out = "the next `regroup sync` sends a readd request; "
	}
	out += "a super admin's client answers it with a readd commit at its next sync, and this installation's next `regroup sync` rejoins"
	if s.RepairDiverged {
		return out + " (even if its epoch secrets diverged: --repair-diverged is on)"
	}
	return out + " if its MLS state can still process the readd commit; if its epoch secrets diverged it stays forked " +
		"(--repair-diverged=false): `regroup sync --repair-diverged` accepts the repair"
}

// ownReadd reads this installation's readd status in the conversation;
// the zero status when it has none.
func (s *session) ownReadd(ctx context.Context, groupID []byte) (ports.ReaddStatus, error) {
	var st ports.ReaddStatus
	err := s.store.Tx(ctx, func(tx ports.Tx) (err error) {
		st, err = tx.Readds().Get(ctx, groupID, s.c.InstallationKey())
		return err
	})
	if errors.Is(err, ports.ErrNotFound) {
		return ports.ReaddStatus{}, nil
	}
	return st, err
}
