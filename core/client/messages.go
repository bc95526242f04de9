package client

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/regroup-mls/regroup/core/policy"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
)

// kindOf reads the message kind an application message carries in its
// authenticated data (COMP-184): one byte, the [ports.MessageKind] value,
// which a delivery service can read without decrypting the message
// (ADR-0030 Decision 7). ok is false for any other value.
func kindOf(aad []byte) (ports.MessageKind, bool) {
	if len(aad) != 1 {
		return 0, false
	}
	switch k := ports.MessageKind(aad[0]); k {
	case ports.MessageApplication, ports.MessageLeaveRequest:
		return k, true
	}
	return 0, false
}

// GroupUpdate is the content of a [ports.MessageGroupUpdated] message:
// what one applied commit changed. It is the retained role evidence the
// commit log's legacy recovery reads (fork-recovery section 3).
type GroupUpdate struct {
	Added            []string `json:"added,omitempty"`
	Removed          []string `json:"removed,omitempty"`
	Readded          [][]byte `json:"readded,omitempty"`
	AddedSuperAdmins []string `json:"added_super_admins,omitempty"`
	// Components are the metadata component ids whose data changed.
	Components []uint16 `json:"components,omitempty"`
}

func (u groupUpdate) encode() []byte {
	b, _ := json.Marshal(GroupUpdate(u)) // plain strings, bytes and numbers always marshal
	return b
}

type groupUpdate GroupUpdate

// DecodeGroupUpdate decodes the content of a group-update message.
func DecodeGroupUpdate(b []byte) (GroupUpdate, error) {
	var u GroupUpdate
	if err := json.Unmarshal(b, &u); err != nil {
		return GroupUpdate{}, fmt.Errorf("group update: %w", err)
	}
	return u, nil
}

// Send encrypts content as an application message, publishes it on the
// conversation's topic and stores it as sent. A viewer of the group may
// not send: that fails with [ErrViewer] (COMP-388). It returns the message's
// sequence id. The client recognises its own message when it reads the
// topic by the hash of its published bytes, so a publish whose response
// was lost is confirmed when the message is read back.
func (cv *Conversation) Send(ctx context.Context, content []byte) (uint64, error) {
	return cv.send(ctx, ports.MessageApplication, content)
}

func (cv *Conversation) send(ctx context.Context, kind ports.MessageKind, content []byte) (uint64, error) {
	c := cv.c
	// Catch up first, so the message is sent in the newest epoch the
	// client can see and every member of that epoch can read it.
	err := c.sendCatchUp(ctx, cv.id)
	if err != nil && !errors.Is(err, ports.ErrUnavailable) {
		return 0, fmt.Errorf("send: %w", err)
	}
	var payload []byte
	var stored ports.Message
	err = c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		g, err := tx.Groups().Get(ctx, cv.id)
		if err != nil {
			return err
		}
		if !g.Active {
			return fmt.Errorf("send: %w", ErrInactiveConversation)
		}
		if left, err := isLeft(ctx, tx, cv.id); err != nil {
			return err
		} else if left && kind != ports.MessageLeaveRequest {
			return fmt.Errorf("send: %w", ErrLeft) // leave.go
		}
		view, err := c.deps.MLS.Group(ctx, tx, cv.id)
		if err != nil {
			return err
		}
		if r, err := policy.RolesOf(view); err == nil {
			if err := policy.MaySend(r, c.InboxID(), kind); err != nil { // COMP-388
				return fmt.Errorf("send: %w", ErrViewer)
			}
		}
		payload, err = c.deps.MLS.Encrypt(ctx, tx, cv.id, content, []byte{byte(kind)})
		if err != nil {
			return fmt.Errorf("send: %w", err)
		}
		h := sha256.Sum256(payload)
		stored, _, err = messagesOf(tx).Insert(ctx, ports.Message{GroupID: cv.id, Kind: kind, SenderInbox: c.InboxID(),
			SenderInstallation: c.InstallationKey(), Epoch: view.Epoch, Content: content, PayloadHash: h[:],
			Own: true, SentAt: c.deps.Clock.Now()})
		if err != nil {
			return err
		}
		if err := putOutbox(ctx, tx, stored, payload, c.deps.Clock.Now()); err != nil {
			return err
		}
		// Consent: a conversation the user messaged is allowed (CONS).
		if g.Consent != ports.ConsentAllowed {
			return tx.Groups().Update(ctx, cv.id, func(gr *ports.Group) error {
				gr.Consent = ports.ConsentAllowed
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	// The message is durable in the outbox: from here on, everything is
	// redone from it and the topic if lost (COMP-188, COMP-551).
	env := &backendpb.ClientEnvelope{TargetTopic: groupTopic(cv.id), Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: payload}}
	seq, err := c.publish(ctx, env)
	if err != nil {
		return 0, fmt.Errorf("send: publish: %w", err)
	}
	seqs := []uint64{seq}
	var confirmed bool
	err = c.txRelaxed(ctx, func(ctx context.Context, tx ports.Tx) (err error) {
		if confirmed, err = confirmSent(ctx, tx, stored, seqs[0], c.deps.Clock.Now()); err != nil {
			return err
		}
		// An id at or below what this client read, which no read of this
		// message got to first: the service reissues ids (COMP-466). A
		// read that got past the id read the message there (COMP-041)
		// and confirmed it, so confirmed is false then.
		if !confirmed {
			return nil
		}
		if g, err := tx.Groups().Get(ctx, cv.id); err != nil || seqs[0] > g.Cursor {
			return err
		} else {
			return c.rewind(ctx, tx, g, fmt.Sprintf("own message given id %d, not above the cursor %d", seqs[0], g.Cursor))
		}
	})
	if err != nil {
		return 0, err
	}
	if confirmed {
		c.ownSent.add(stored.PayloadHash, seqs[0])
		stored.SequenceID = seqs[0]
		c.events.emit(MessageEvent{Message: stored})
	}
	return seqs[0], nil
}

// Messages returns up to limit of the conversation's messages after
// sequence id afterSeq in topic order, then the sent messages whose
// publish is not yet confirmed; limit <= 0 returns all. Messages survive
// a rejoin (JOIN-044).
func (cv *Conversation) Messages(ctx context.Context, afterSeq uint64, limit int) ([]ports.Message, error) {
	var out []ports.Message
	err := cv.c.tx(ctx, func(ctx context.Context, tx ports.Tx) (err error) {
		out, err = messagesOf(tx).List(ctx, cv.id, afterSeq, limit)
		return err
	})
	return out, err
}

// The outbox keeps the published bytes of every sent message until its
// sequence id is confirmed, so that a publish whose outcome was unknown
// is sent again, with the same bytes, instead of being lost (COMP-188).
// Keys are the hex group id, "/", and the message ID; values the send
// time in Unix nanoseconds, then the payload.
const nsOutbox = "client.outbox"

func outboxKey(groupID []byte, id uint64) string { return fmt.Sprintf("%x/%020d", groupID, id) }

func putOutbox(ctx context.Context, tx ports.Tx, m ports.Message, payload []byte, now time.Time) error {
	v := binary.BigEndian.AppendUint64(nil, uint64(now.UnixNano()))
	return tx.Blobs().Put(ctx, nsOutbox, outboxKey(m.GroupID, m.ID), append(v, payload...))
}

// confirmSent records the sequence id of a sent message unless reading the
// topic already did, and drops it from the outbox; confirmed reports that
// this call recorded it.
func confirmSent(ctx context.Context, tx ports.Tx, m ports.Message, seq uint64, at time.Time) (confirmed bool, err error) {
	if err := tx.Blobs().Delete(ctx, nsOutbox, outboxKey(m.GroupID, m.ID)); err != nil {
		return false, err
	}
	cur, err := messagesOf(tx).ByPayloadHash(ctx, m.GroupID, m.PayloadHash)
	if err != nil || cur.SequenceID != 0 {
		return false, err
	}
	return true, messagesOf(tx).SetSequenceID(ctx, m.ID, seq, at)
}

// resendOutbox publishes again every sent message that has waited longer
// than outboxGrace for its confirmation, with the bytes first published.
// A message the delivery service refuses for what it is leaves the outbox
// and stays unconfirmed.
func (c *Client) resendOutbox(ctx context.Context) error {
	type pending struct {
		key     string
		payload []byte
	}
	var due []pending
	now := c.deps.Clock.Now()
	err := c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		due = nil
		keys, err := tx.Blobs().Keys(ctx, nsOutbox, "")
		if err != nil {
			return err
		}
		for _, k := range keys {
			v, err := tx.Blobs().Get(ctx, nsOutbox, k)
			if err != nil {
				return err
			}
			if len(v) < 8 || now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(v)))) < outboxGrace {
				continue
			}
			due = append(due, pending{key: k, payload: v[8:]})
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The due messages go out up to maxPublishBatch per call (COMP-550),
	// and the confirmations of a call's messages commit together.
	var errs []error
	for len(due) > 0 {
		chunk := due[:min(len(due), maxPublishBatch)]
		due = due[len(chunk):]
		envs := make([]*backendpb.ClientEnvelope, 0, len(chunk))
		gids := make([][]byte, 0, len(chunk))
		for _, p := range chunk {
			gidHex, _, _ := strings.Cut(p.key, "/")
			gid, err := hex.DecodeString(gidHex)
			if err != nil {
				gid = nil // not a key this client wrote: skipped below
			}
			gids = append(gids, gid)
			envs = append(envs, &backendpb.ClientEnvelope{TargetTopic: groupTopic(gid), Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: p.payload}})
		}
		ok := 0
		for i, g := range gids {
			if g != nil {
				envs[ok], gids[ok], chunk[ok] = envs[i], g, chunk[i]
				ok++
			}
		}
		envs, gids, chunk = envs[:ok], gids[:ok], chunk[:ok]
		if len(chunk) == 0 {
			continue
		}
		seqs := make([]uint64, len(chunk))
		perr := make([]error, len(chunk))
		all, err := publishRetry(ctx, c.deps.Transport, envs)
		switch {
		case err == nil:
			copy(seqs, all)
		case len(chunk) > 1 && errors.Is(err, ports.ErrInvalidArgument):
			// A refusal stores none of the call: find the refused ones.
			for i, env := range envs {
				one, err := publishRetry(ctx, c.deps.Transport, []*backendpb.ClientEnvelope{env})
				if perr[i] = err; err == nil {
					seqs[i] = one[0]
				}
			}
		default:
			for i := range perr {
				perr[i] = err
			}
		}
		err = c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
			for i, p := range chunk {
				refused := errors.Is(perr[i], ports.ErrInvalidArgument)
				if perr[i] != nil && !refused {
					continue
				}
				if refused {
					if err := tx.Blobs().Delete(ctx, nsOutbox, p.key); err != nil {
						return err
					}
					continue
				}
				h := sha256.Sum256(p.payload)
				m, err := messagesOf(tx).ByPayloadHash(ctx, gids[i], h[:])
				if errors.Is(err, ports.ErrNotFound) {
					if err := tx.Blobs().Delete(ctx, nsOutbox, p.key); err != nil {
						return err
					}
					continue
				}
				if err != nil {
					return err
				}
				if _, err := confirmSent(ctx, tx, m, seqs[i], c.deps.Clock.Now()); err != nil {
					return err
				}
			}
			return nil
		})
		errs = append(errs, err)
		for i := range chunk {
			if perr[i] != nil && !errors.Is(perr[i], ports.ErrInvalidArgument) {
				errs = append(errs, fmt.Errorf("resend: %w", perr[i]))
			}
		}
	}
	return errors.Join(errs...)
}

// outboxGrace is how long a sent message waits for its confirmation
// before the workers publish it again.
const outboxGrace = 30 * time.Second
