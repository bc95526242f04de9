package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/ports"
)

// whoamiJSON is the --json output of init and whoami.
type whoamiJSON struct {
	InboxID         string `json:"inbox_id"`
	InstallationKey string `json:"installation_key"`
	Home            string `json:"home"`
	Server          string `json:"server"`
}

func whoami(s *session) whoamiJSON {
	return whoamiJSON{InboxID: s.c.InboxID(), InstallationKey: hex.EncodeToString(s.c.InstallationKey()), Home: s.home, Server: s.server}
}

func cmdWhoami(_ context.Context, e *env) error {
	v := whoami(e.s)
	return e.out.emit(v, func(w io.Writer) {
		fmt.Fprintf(w, "inbox         %s\ninstallation  %s\nhome          %s\nserver        %s\n", v.InboxID, v.InstallationKey, v.Home, v.Server)
	})
}

// convJSON is a conversation in --json output.
type convJSON struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Name      string `json:"name,omitempty"`
	Peer      string `json:"peer,omitempty"`
	Epoch     uint64 `json:"epoch"`
	Active    bool   `json:"active"`
	Consent   string `json:"consent"`
	ForkState string `json:"fork_state"`
}

func (s *session) convJSON(ctx context.Context, c conv) (convJSON, error) {
	st, err := c.cv.ForkState(ctx)
	if err != nil {
		return convJSON{}, err
	}
	v := convJSON{ID: hex.EncodeToString(c.info.ID), Type: typeString(c.info.ConversationType), Name: c.info.Name,
		Epoch: c.info.Epoch, Active: c.info.Active, Consent: consentString(c.info.Consent), ForkState: st.State.String()}
	for _, m := range c.info.DMMembers {
		if m != s.c.InboxID() {
			v.Peer = m
		}
	}
	return v, nil
}

// syncQuietly runs one sync before a command that shows or changes
// conversations; its failures are warnings, except an unreachable server.
func (s *session) syncQuietly(ctx context.Context) error {
	err := s.c.SyncAll(ctx)
	if err == nil {
		return nil
	}
	if errors.Is(err, ports.ErrUnavailable) {
		return err
	}
	s.warn("sync: %v", err)
	return nil
}

// checkInboxes checks, before anything is committed, that each id is an
// inbox id and that regroupd holds its identity, so that a typo creates
// no group and commits nothing.
func (s *session) checkInboxes(ctx context.Context, ids []string) error {
	for _, id := range ids {
		topic, err := identity.Topic(id)
		if err != nil {
			return usagef("%q is not an inbox id: 64 lowercase hex digits, as `regroup whoami` prints", id)
		}
		n, err := s.transport.HighestSequenceID(ctx, topic)
		if err != nil {
			return fmt.Errorf("inbox %s: %w", short(id), err)
		}
		if n == 0 {
			return fmt.Errorf("%w: inbox %s is unknown to regroupd at %s: its user runs `regroup init --server %s` first", errNotFound, id, s.server, s.server)
		}
	}
	return nil
}

func cmdGroupCreate(ctx context.Context, e *env) error {
	if err := checkGroupName(e.args[0]); err != nil {
		return err
	}
	if err := e.s.checkInboxes(ctx, e.args[1:]); err != nil {
		return err
	}
	cv, err := e.s.c.CreateGroup(ctx, client.GroupOptions{Name: e.args[0], Members: e.args[1:]})
	if cv == nil {
		return err
	}
	if err != nil {
		return fmt.Errorf("group %x created, but adding its members failed: %w; retry with `regroup group add %x INBOX...`", cv.ID(), err, cv.ID()[:8])
	}
	if err := e.s.syncQuietly(ctx); err != nil { // publishes the commit's log entry
		return err
	}
	return e.printConv(ctx, cv.ID(), "created")
}

// printConv prints the conversation id as a command's result.
func (e *env) printConv(ctx context.Context, id []byte, verb string) error {
	c, err := e.s.resolve(ctx, hex.EncodeToString(id))
	if err != nil {
		return err
	}
	v, err := e.s.convJSON(ctx, c)
	if err != nil {
		return err
	}
	return e.out.emit(v, func(w io.Writer) {
		fmt.Fprintf(w, "%s %s %s (epoch %d)\n", verb, v.Type, v.ID, v.Epoch)
	})
}

// membershipChange runs a commit on the named conversation after a sync.
func membershipChange(ctx context.Context, e *env, verb string, fn func(cv *client.Conversation) error) error {
	if err := e.s.syncQuietly(ctx); err != nil {
		return err
	}
	c, err := e.s.resolve(ctx, e.args[0])
	if err != nil {
		return err
	}
	if err := fn(c.cv); err != nil {
		return err
	}
	if err := e.s.syncQuietly(ctx); err != nil { // publishes the commit's log entry
		return err
	}
	return e.printConv(ctx, c.info.ID, verb)
}

func cmdGroupAdd(ctx context.Context, e *env) error {
	if err := e.s.checkInboxes(ctx, e.args[1:]); err != nil {
		return err
	}
	return membershipChange(ctx, e, "updated", func(cv *client.Conversation) error { return cv.AddMembers(ctx, e.args[1:]...) })
}

func cmdGroupRemove(ctx context.Context, e *env) error {
	return membershipChange(ctx, e, "updated", func(cv *client.Conversation) error { return cv.RemoveMembers(ctx, e.args[1:]...) })
}

func cmdGroupRename(ctx context.Context, e *env) error {
	if err := checkGroupName(e.args[1]); err != nil {
		return err
	}
	return membershipChange(ctx, e, "renamed", func(cv *client.Conversation) error { return cv.SetName(ctx, e.args[1]) })
}

func cmdGroupList(ctx context.Context, e *env) error {
	if err := e.s.syncQuietly(ctx); err != nil {
		return err
	}
	all, err := e.s.conversations(ctx)
	if err != nil {
		return err
	}
	out := []convJSON{}
	for _, c := range all {
		v, err := e.s.convJSON(ctx, c)
		if err != nil {
			return err
		}
		out = append(out, v)
	}
	return e.out.emit(out, func(w io.Writer) {
		if len(out) == 0 {
			fmt.Fprintln(w, "no conversations yet: `regroup group create NAME INBOX...` starts one")
			return
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tTYPE\tNAME\tEPOCH\tACTIVE\tCONSENT\tFORK STATE")
		for i, v := range out {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%v\t%s\t%s\n", short(v.ID), v.Type, clean(all[i].label(e.s.c.InboxID())), v.Epoch, v.Active, v.Consent, v.ForkState)
		}
		tw.Flush()
	})
}

// infoJSON is the --json output of group info.
type infoJSON struct {
	convJSON
	Creator     string       `json:"creator,omitempty"`
	SuperAdmins []string     `json:"super_admins"`
	Admins      []string     `json:"admins"`
	Members     []memberJSON `json:"members"`
	// Cursor is the last sequence id processed on the group's topic.
	Cursor             uint64 `json:"cursor"`
	EpochAuthenticator string `json:"epoch_authenticator"`
}

type memberJSON struct {
	InboxID         string `json:"inbox_id"`
	InstallationKey string `json:"installation_key"`
	LeafIndex       uint32 `json:"leaf_index"`
}

func cmdGroupInfo(ctx context.Context, e *env) error {
	c, err := e.s.resolve(ctx, e.args[0])
	if err != nil {
		return err
	}
	base, err := e.s.convJSON(ctx, c)
	if err != nil {
		return err
	}
	v := infoJSON{convJSON: base, Creator: c.info.Creator, SuperAdmins: nonNil(c.info.SuperAdmins), Admins: nonNil(c.info.Admins),
		Members: []memberJSON{}, Cursor: c.info.Cursor, EpochAuthenticator: hex.EncodeToString(c.info.EpochAuthenticator)}
	if c.info.Active {
		ms, err := c.cv.Members(ctx)
		if err != nil {
			return err
		}
		for _, m := range ms {
			v.Members = append(v.Members, memberJSON{InboxID: m.InboxID, InstallationKey: hex.EncodeToString(m.InstallationKey), LeafIndex: m.LeafIndex})
		}
	}
	return e.out.emit(v, func(w io.Writer) {
		fmt.Fprintf(w, "%s %s  %q\n", v.Type, v.ID, clean(v.Name))
		fmt.Fprintf(w, "epoch %d (authenticator %s…), active %v, consent %s, fork state %s, cursor %d\n",
			v.Epoch, hexShort(c.info.EpochAuthenticator), v.Active, v.Consent, v.ForkState, v.Cursor)
		if v.Creator != "" {
			fmt.Fprintf(w, "creator      %s\n", clean(v.Creator))
		}
		fmt.Fprintf(w, "super admins %s\nadmins       %s\nmembers:\n", clean(strings.Join(v.SuperAdmins, " ")), clean(strings.Join(v.Admins, " ")))
		for _, m := range v.Members {
			me := ""
			if m.InstallationKey == hex.EncodeToString(e.s.c.InstallationKey()) {
				me = "  (this installation)"
			}
			fmt.Fprintf(w, "  leaf %-3d %s  installation %s…%s\n", m.LeafIndex, clean(m.InboxID), m.InstallationKey[:16], me)
		}
	})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func cmdDM(ctx context.Context, e *env) error {
	if err := e.s.checkInboxes(ctx, e.args); err != nil {
		return err
	}
	if err := e.s.syncQuietly(ctx); err != nil {
		return err
	}
	cv, err := e.s.c.CreateDM(ctx, e.args[0])
	if cv == nil {
		return err
	}
	if err != nil {
		return fmt.Errorf("DM %x created, but adding %s failed: %w", cv.ID(), e.args[0], err)
	}
	if err := e.s.syncQuietly(ctx); err != nil {
		return err
	}
	return e.printConv(ctx, cv.ID(), "opened")
}

// open syncs, finds the named conversation and allows it (COMP-228).
func (e *env) open(ctx context.Context) (conv, error) {
	if err := e.s.syncQuietly(ctx); err != nil {
		return conv{}, err
	}
	c, err := e.s.resolve(ctx, e.args[0])
	if err != nil {
		return conv{}, err
	}
	if !c.info.Active {
		return c, fmt.Errorf("conversation %x is inactive: this installation was removed from it", c.info.ID[:8])
	}
	return c, e.s.allow(ctx, &c)
}

// sendJSON is the --json output of send.
type sendJSON struct {
	Conversation string `json:"conversation"`
	Seq          uint64 `json:"seq"`
}

func cmdSend(ctx context.Context, e *env) error {
	text, err := messageText(e.args[1:]) // before anything is synced or allowed
	if err != nil {
		return err
	}
	c, err := e.open(ctx)
	if err != nil {
		return err
	}
	seq, err := c.cv.Send(ctx, []byte(text))
	if err != nil {
		return err
	}
	v := sendJSON{Conversation: hex.EncodeToString(c.info.ID), Seq: seq}
	return e.out.emit(v, func(w io.Writer) {
		fmt.Fprintf(w, "sent to %s as sequence id %d\n", clean(c.label(e.s.c.InboxID())), seq)
	})
}

// messageJSON is a message in read's --json output.
type messageJSON struct {
	Seq    uint64    `json:"seq"`
	Kind   string    `json:"kind"`
	Sender string    `json:"sender_inbox"`
	Own    bool      `json:"own"`
	SentAt time.Time `json:"sent_at"`
	Epoch  uint64    `json:"epoch"`
	// Text is the message as text: exact when the sender's bytes are
	// UTF-8, with U+FFFD for each byte that is not otherwise.
	Text string `json:"text"`
	// Content is the application message's exact bytes (base64 in
	// JSON); absent for updates.
	Content []byte `json:"content_base64,omitempty"`
}

func cmdRead(ctx context.Context, e *env) error {
	if e.o.limit < 0 {
		return usagef("--limit %d: want 0 (all) or more", e.o.limit)
	}
	c, err := e.open(ctx)
	if err != nil {
		return err
	}
	msgs, err := c.cv.Messages(ctx, 0, 0)
	if err != nil {
		return err
	}
	if e.o.limit > 0 && len(msgs) > e.o.limit {
		msgs = msgs[len(msgs)-e.o.limit:]
	}
	out := []messageJSON{}
	for _, m := range msgs {
		out = append(out, messageOf(m))
	}
	return e.out.emit(out, func(w io.Writer) {
		for _, m := range out {
			who := clean(short(m.Sender))
			if m.Own || m.Sender == e.s.c.InboxID() { // a commit's update is not Own; it is still mine
				who = "me"
			}
			fmt.Fprintf(w, "%s  %-16s  %s\n", m.SentAt.Local().Format("15:04:05"), who, clean(m.Text))
		}
		if len(out) == 0 {
			fmt.Fprintln(w, "no messages yet")
		}
	})
}

// messageOf renders a stored message: an application message's text, or
// a group update's changes.
func messageOf(m ports.Message) messageJSON {
	v := messageJSON{Seq: m.SequenceID, Sender: m.SenderInbox, Own: m.Own, SentAt: m.SentAt, Epoch: m.Epoch}
	switch m.Kind {
	case ports.MessageApplication:
		v.Kind, v.Text, v.Content = "text", string(m.Content), m.Content
	case ports.MessageGroupUpdated:
		v.Kind, v.Text = "update", describeUpdate(m.Content)
	default:
		v.Kind, v.Text = "other", fmt.Sprintf("(message kind %d)", m.Kind)
	}
	return v
}

func describeUpdate(b []byte) string {
	u, err := client.DecodeGroupUpdate(b)
	if err != nil {
		return "* group updated"
	}
	var parts []string
	for _, a := range u.Added {
		parts = append(parts, "added "+short(a))
	}
	for _, r := range u.Removed {
		parts = append(parts, "removed "+short(r))
	}
	for _, k := range u.Readded {
		parts = append(parts, "readded installation "+hexShort(k))
	}
	if len(u.Components) > 0 {
		parts = append(parts, "changed the metadata")
	}
	if len(parts) == 0 {
		parts = append(parts, "updated keys")
	}
	return "* " + strings.Join(parts, ", ")
}
