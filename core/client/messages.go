package client

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"

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
// conversation's topic and stores it as sent. It returns the message's
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
	unlock := c.lock(cv.id)
	err := c.processGroup(ctx, cv.id)
	unlock()
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
		view, err := c.deps.MLS.Group(ctx, tx, cv.id)
		if err != nil {
			return err
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
	env := &backendpb.ClientEnvelope{TargetTopic: groupTopic(cv.id), Payload: &backendpb.ClientEnvelope_GroupMessage{GroupMessage: payload}}
	seqs, err := publishRetry(ctx, c.deps.Transport, []*backendpb.ClientEnvelope{env})
	if err != nil {
		return 0, fmt.Errorf("send: publish: %w", err)
	}
	confirmed := false
	err = c.tx(ctx, func(ctx context.Context, tx ports.Tx) error {
		m, err := messagesOf(tx).ByPayloadHash(ctx, cv.id, stored.PayloadHash)
		if err != nil || m.SequenceID != 0 { // already confirmed by reading the topic
			confirmed = false
			return err
		}
		confirmed = true
		return messagesOf(tx).SetSequenceID(ctx, stored.ID, seqs[0], c.deps.Clock.Now())
	})
	if err != nil {
		return 0, err
	}
	if confirmed {
		stored.SequenceID = seqs[0]
		c.events.emit(MessageEvent{Message: stored})
	}
	c.wakeWorkers()
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
