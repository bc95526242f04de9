package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/ports"
)

// conv is a conversation the session holds, with its record.
type conv struct {
	cv   *client.Conversation
	info client.Info
}

// label is how a person recognises the conversation: the group's name, or
// the DM's peer inbox.
func (c conv) label(self string) string {
	if c.info.ConversationType == ports.ConversationDM {
		for _, m := range c.info.DMMembers {
			if m != self {
				return "dm " + short(m)
			}
		}
	}
	return c.info.Name
}

// conversations returns every conversation the session holds, in id
// order.
func (s *session) conversations(ctx context.Context) ([]conv, error) {
	cvs, err := s.c.Conversations(ctx, nil)
	if err != nil {
		return nil, err
	}
	out := make([]conv, 0, len(cvs))
	for _, cv := range cvs {
		info, err := cv.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("conversation %x: %w", cv.ID(), err)
		}
		out = append(out, conv{cv: cv, info: info})
	}
	sort.Slice(out, func(i, j int) bool { return hex.EncodeToString(out[i].info.ID) < hex.EncodeToString(out[j].info.ID) })
	return out, nil
}

// resolve finds the conversation ref names (COMP-226): its whole id in
// hex, a group name, a DM peer's inbox id, or a unique prefix of the id
// in hex, tried in that order.
func (s *session) resolve(ctx context.Context, ref string) (conv, error) {
	all, err := s.conversations(ctx)
	if err != nil {
		return conv{}, err
	}
	return pick(all, ref, s.c.InboxID())
}

// pick applies the rule of resolve to the conversations all.
func pick(all []conv, ref, self string) (conv, error) {
	if ref == "" {
		return conv{}, usagef("empty conversation name")
	}
	lower := strings.ToLower(ref)
	tiers := []func(c conv) bool{
		func(c conv) bool { return hex.EncodeToString(c.info.ID) == lower },
		func(c conv) bool { return c.info.ConversationType == ports.ConversationGroup && c.info.Name == ref },
		func(c conv) bool {
			return c.info.ConversationType == ports.ConversationDM && len(c.info.DMMembers) == 2 &&
				(c.info.DMMembers[0] == ref || c.info.DMMembers[1] == ref) && ref != self
		},
		func(c conv) bool { return strings.HasPrefix(hex.EncodeToString(c.info.ID), lower) },
	}
	for _, match := range tiers {
		var found []conv
		for _, c := range all {
			if match(c) {
				found = append(found, c)
			}
		}
		switch {
		case len(found) == 1:
			return found[0], nil
		case len(found) > 1:
			var ids []string
			for _, c := range found {
				ids = append(ids, fmt.Sprintf("%x (%s)", c.info.ID[:8], clean(c.label(self))))
			}
			return conv{}, usagef("%q names %d conversations: %s; give more of the id", ref, len(found), strings.Join(ids, ", "))
		}
	}
	return conv{}, fmt.Errorf("%w: no conversation %q here; `regroup group list` lists them, and `regroup sync` joins those you were just added to",
		errNotFound, ref)
}

// allow sets the conversation's consent to allowed, if it is not, and
// says so: the commit log is read only for allowed conversations
// (FORK-030), and a user who reads or sends to a conversation accepts it
// (COMP-228).
func (s *session) allow(ctx context.Context, c *conv) error {
	if c.info.Consent == ports.ConsentAllowed {
		return nil
	}
	if err := c.cv.SetConsent(ctx, ports.ConsentAllowed); err != nil {
		return fmt.Errorf("allow conversation: %w", err)
	}
	c.info.Consent = ports.ConsentAllowed
	if _, err := c.cv.SyncCommitLog(ctx); err != nil {
		s.warn("commit log of %x: %v", c.info.ID[:8], err)
	}
	return nil
}

// short returns the first 16 hex digits of a hex id, for tables.
func short(id string) string {
	if len(id) > 16 {
		return id[:16]
	}
	return id
}

// hexShort returns the first 8 bytes of b in hex.
func hexShort(b []byte) string {
	if len(b) > 8 {
		b = b[:8]
	}
	return hex.EncodeToString(b)
}

func consentString(c ports.ConsentState) string {
	switch c {
	case ports.ConsentAllowed:
		return "allowed"
	case ports.ConsentDenied:
		return "denied"
	}
	return "unknown"
}

func typeString(t ports.ConversationType) string {
	switch t {
	case ports.ConversationDM:
		return "dm"
	case ports.ConversationGroup:
		return "group"
	}
	return "other"
}
