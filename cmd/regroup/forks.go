package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/regroup-mls/regroup/core/commitlog"
	"github.com/regroup-mls/regroup/ports"
)

// forkJSON is one conversation in fork-status's --json output.
type forkJSON struct {
	ID                string `json:"id"`
	Name              string `json:"name"`
	State             string `json:"fork_state"`
	MaybeForked       bool   `json:"maybe_forked"`
	MaybeForkedReason string `json:"maybe_forked_reason"`
	// SharedCommit is the last commit both logs hold for this membership
	// (0: none yet); NewestLocal the newest commit this installation
	// recorded.
	SharedCommit uint64 `json:"last_shared_commit"`
	NewestLocal  uint64 `json:"newest_local_commit"`
	Consent      string `json:"consent"`
	// LogRead reports whether the commit log is read (consent allowed,
	// FORK-030).
	LogRead bool   `json:"commit_log_read"`
	Hint    string `json:"hint,omitempty"`
	// Repair says what will repair a forked conversation, and when,
	// under the recovery policy in effect (empty when not forked).
	Repair string `json:"repair,omitempty"`
	// ReaddRequested reports this installation's readd request as out.
	ReaddRequested bool `json:"readd_requested"`
}

func cmdForkStatus(ctx context.Context, e *env) error {
	var cs []conv
	if len(e.args) == 1 {
		c, err := e.s.resolve(ctx, e.args[0])
		if err != nil {
			return err
		}
		cs = []conv{c}
	} else {
		all, err := e.s.conversations(ctx)
		if err != nil {
			return err
		}
		cs = all
	}
	out := []forkJSON{}
	for _, c := range cs {
		v, err := e.s.forkStatus(ctx, c)
		if err != nil {
			return err
		}
		out = append(out, v)
	}
	return e.out.emit(out, func(w io.Writer) {
		if len(out) == 0 {
			fmt.Fprintln(w, "no conversations yet")
			return
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tFORK STATE\tMAYBE FORKED\tLAST SHARED COMMIT\tNEWEST LOCAL\tCONSENT")
		for _, v := range out {
			mf := "no"
			if v.MaybeForked {
				mf = "yes: " + v.MaybeForkedReason
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", short(v.ID), clean(v.Name), v.State, clean(mf), v.SharedCommit, v.NewestLocal, v.Consent)
		}
		tw.Flush()
		for _, v := range out {
			if v.Hint != "" {
				fmt.Fprintf(w, "%s: %s\n", short(v.ID), v.Hint)
			}
		}
	})
}

// forkStatus reads one conversation's fork state and computes its shared
// commit from the two logs of its current membership.
func (s *session) forkStatus(ctx context.Context, c conv) (forkJSON, error) {
	st, err := c.cv.ForkState(ctx)
	if err != nil {
		return forkJSON{}, err
	}
	local, remote, g, err := s.logs(ctx, c)
	if err != nil {
		return forkJSON{}, err
	}
	cmp := commitlog.ComputeComparison(local, remote, g.Membership)
	v := forkJSON{ID: hex.EncodeToString(c.info.ID), Name: c.label(s.c.InboxID()), State: st.State.String(), MaybeForked: st.MaybeForked,
		MaybeForkedReason: st.MaybeForkedReason, SharedCommit: cmp.Shared, NewestLocal: cmp.NewestLocal,
		Consent: consentString(c.info.Consent), LogRead: c.info.Consent == ports.ConsentAllowed}
	readd, err := s.ownReadd(ctx, c.info.ID)
	if err != nil {
		return forkJSON{}, err
	}
	v.ReaddRequested = readd.Requested
	v.Repair = s.recovery.repairOutlook(st.State, readd, v.LogRead)
	switch {
	case !v.LogRead:
		v.Hint = "the commit log is read only for allowed conversations; `regroup read` allows this one"
	case st.State == ports.ForkForked:
		v.Hint = "forked; repair: " + v.Repair
	case st.State == ports.ForkUnknown && cmp.Shared == 0:
		v.Hint = "unknown until a commit of this membership is in both logs"
	case st.State == ports.ForkUnknown:
		v.Hint = "unknown: newer local commits than the log holds; `regroup sync` reads it"
	}
	return v, nil
}

// logs returns the conversation's local and accepted remote entries and
// its record.
func (s *session) logs(ctx context.Context, c conv) ([]ports.LocalCommitLogEntry, []ports.RemoteCommitLogEntry, ports.Group, error) {
	local, err := c.cv.LocalEntries(ctx)
	if err != nil {
		return nil, nil, ports.Group{}, err
	}
	remote, err := c.cv.RemoteEntries(ctx)
	if err != nil {
		return nil, nil, ports.Group{}, err
	}
	var g ports.Group
	err = s.store.Tx(ctx, func(tx ports.Tx) (err error) {
		g, err = tx.Groups().Get(ctx, c.info.ID)
		return err
	})
	return local, remote, g, err
}

// entryJSON is one side of a row of log.
type entryJSON struct {
	Result        string `json:"result"`
	Epoch         uint64 `json:"epoch"`
	Authenticator string `json:"epoch_authenticator"`
	// Membership is the local entry's membership; Removed marks the
	// entry of the commit that removed this installation.
	Membership uint64 `json:"membership,omitempty"`
	Removed    bool   `json:"removed_this_installation,omitempty"`
	// Author is the installation key of a remote entry's author.
	Author string `json:"author,omitempty"`
}

// logRowJSON is one commit of log: what this installation recorded and
// the first entry accepted from the log for it.
type logRowJSON struct {
	Commit   uint64     `json:"commit"`
	Local    *entryJSON `json:"local"`
	Remote   *entryJSON `json:"remote"`
	Diverges bool       `json:"diverges"`
}

// logJSON is log's --json output.
type logJSON struct {
	Conversation string `json:"conversation"`
	ForkState    string `json:"fork_state"`
	// Membership is the current membership; local entries of an earlier
	// one were recorded before a rejoin.
	Membership uint64       `json:"membership"`
	Rows       []logRowJSON `json:"rows"`
}

func cmdLog(ctx context.Context, e *env) error {
	c, err := e.s.resolve(ctx, e.args[0])
	if err != nil {
		return err
	}
	st, err := c.cv.ForkState(ctx)
	if err != nil {
		return err
	}
	local, remote, g, err := e.s.logs(ctx, c)
	if err != nil {
		return err
	}
	v := logJSON{Conversation: hex.EncodeToString(c.info.ID), ForkState: st.State.String(), Membership: g.Membership, Rows: logRows(local, remote)}
	return e.out.emit(v, func(w io.Writer) {
		fmt.Fprintf(w, "commit log of %s (%s): fork state %s\n", short(v.Conversation), clean(c.label(e.s.c.InboxID())), v.ForkState)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "COMMIT\tLOCAL RESULT\tEPOCH\tAUTHENTICATOR\t│\tREMOTE RESULT\tEPOCH\tAUTHENTICATOR\tAUTHOR\t")
		for _, r := range v.Rows {
			fmt.Fprintf(tw, "%d\t%s\t│\t%s\t%s\n", r.Commit, side(r.Local, false), side(r.Remote, true), mark(r, g.Membership))
		}
		tw.Flush()
		if !c.info.Active {
			fmt.Fprintln(w, "this installation is not active in the conversation")
		}
	})
}

func side(e *entryJSON, remote bool) string {
	if e == nil {
		if remote {
			return "—\t\t\t"
		}
		return "—\t\t"
	}
	auth := e.Authenticator
	if len(auth) > 16 {
		auth = auth[:16] + "…"
	}
	result := e.Result
	if e.Removed {
		result += " (removed me)"
	}
	if remote {
		return fmt.Sprintf("%s\t%d\t%s\t%s", result, e.Epoch, auth, short(e.Author))
	}
	return fmt.Sprintf("%s\t%d\t%s", result, e.Epoch, auth)
}

// mark flags a diverging row; one of an earlier membership (before a
// rejoin) is history, not the current state.
func mark(r logRowJSON, membership uint64) string {
	switch {
	case !r.Diverges:
		return ""
	case r.Local.Membership < membership:
		return "<< diverged (earlier membership)"
	}
	return "<< diverges"
}

// logRows lines the two logs up by commit sequence id: per commit, the
// newest local entry and the first accepted remote entry (the one the
// fork state compares, FORK-020). A row diverges when both sides hold an
// applied epoch authenticator and they differ.
func logRows(local []ports.LocalCommitLogEntry, remote []ports.RemoteCommitLogEntry) []logRowJSON {
	rows := map[uint64]*logRowJSON{}
	row := func(seq uint64) *logRowJSON {
		if rows[seq] == nil {
			rows[seq] = &logRowJSON{Commit: seq}
		}
		return rows[seq]
	}
	for _, l := range local {
		row(l.CommitSequenceID).Local = &entryJSON{Result: resultString(l.CommitResult), Epoch: l.AppliedEpochNumber,
			Authenticator: hex.EncodeToString(l.AppliedEpochAuthenticator), Membership: l.Membership, Removed: l.RemovedThisInstallation}
	}
	rs := append([]ports.RemoteCommitLogEntry(nil), remote...)
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].EnvelopeSequenceID < rs[j].EnvelopeSequenceID })
	for _, r := range rs {
		if rw := row(r.CommitSequenceID); rw.Remote == nil {
			rw.Remote = &entryJSON{Result: resultString(r.CommitResult), Epoch: r.AppliedEpochNumber,
				Authenticator: hex.EncodeToString(r.AppliedEpochAuthenticator), Author: hex.EncodeToString(r.AuthorInstallationKey)}
		}
	}
	out := make([]logRowJSON, 0, len(rows))
	for _, r := range rows {
		r.Diverges = r.Local != nil && r.Remote != nil && !r.Local.Removed && r.Local.Authenticator != "" && r.Remote.Authenticator != "" &&
			r.Local.Authenticator != r.Remote.Authenticator
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Commit < out[j].Commit })
	return out
}

func resultString(r ports.CommitResult) string {
	switch r {
	case ports.CommitResultApplied:
		return "applied"
	case ports.CommitResultWrongEpoch:
		return "wrong epoch"
	case ports.CommitResultUndecryptable:
		return "undecryptable"
	case ports.CommitResultInvalid:
		return "invalid"
	}
	return "unspecified"
}

// welcomesJSON is welcomes' --json output.
type welcomesJSON struct {
	Held     []heldJSON     `json:"held"`
	Rejected []rejectedJSON `json:"rejected"`
}

type heldJSON struct {
	Seq       uint64     `json:"seq"`
	Group     string     `json:"group,omitempty"`
	Reason    string     `json:"reason"`
	Deadline  *time.Time `json:"deadline,omitempty"`
	FirstSeen time.Time  `json:"first_seen"`
	Attempts  int        `json:"attempts"`
}

type rejectedJSON struct {
	Seq        uint64    `json:"seq"`
	Group      string    `json:"group,omitempty"`
	Rule       string    `json:"rule"`
	Reason     string    `json:"reason"`
	RejectedAt time.Time `json:"rejected_at"`
}

func cmdWelcomes(ctx context.Context, e *env) error {
	held, err := e.s.c.HeldWelcomes(ctx)
	if err != nil {
		return err
	}
	rejected, err := e.s.c.RejectedWelcomes(ctx)
	if err != nil {
		return err
	}
	v := welcomesJSON{Held: []heldJSON{}, Rejected: []rejectedJSON{}}
	for _, h := range held {
		j := heldJSON{Seq: h.SequenceID, Group: hex.EncodeToString(h.GroupID), Reason: h.Reason, FirstSeen: h.FirstSeenAt, Attempts: h.Attempts}
		if !h.Deadline.IsZero() {
			d := h.Deadline
			j.Deadline = &d
		}
		v.Held = append(v.Held, j)
	}
	for _, r := range rejected {
		v.Rejected = append(v.Rejected, rejectedJSON{Seq: r.SequenceID, Group: hex.EncodeToString(r.GroupID), Rule: r.Rule, Reason: r.Reason,
			RejectedAt: r.RejectedAt})
	}
	return e.out.emit(v, func(w io.Writer) { printWelcomes(w, v) })
}

func printWelcomes(w io.Writer, v welcomesJSON) {
	fmt.Fprintf(w, "held Welcomes: %d\n", len(v.Held))
	for _, h := range v.Held {
		deadline := "no deadline"
		if h.Deadline != nil {
			deadline = "deadline " + h.Deadline.Local().Format(time.DateTime)
		}
		fmt.Fprintf(w, "  welcome %d  group %s  %s, %d attempt(s): %s\n", h.Seq, shortOr(h.Group), deadline, h.Attempts, clean(h.Reason))
	}
	fmt.Fprintf(w, "rejected Welcomes: %d\n", len(v.Rejected))
	for _, r := range v.Rejected {
		fmt.Fprintf(w, "  welcome %d  group %s  %s  %s: %s\n", r.Seq, shortOr(r.Group), r.RejectedAt.Local().Format(time.DateTime), clean(r.Rule), clean(r.Reason))
	}
}

func shortOr(id string) string {
	if id == "" {
		return "(unread)"
	}
	return short(id)
}
