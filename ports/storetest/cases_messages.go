package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

var messageCases = []testCase{
	{"JOIN-044/MessagesKeptInOrderOncePerPosition", testMessagesOnce},
	{"COMP-466/ReissuedSequenceIDKeepsBothMessages", testMessagesReissued},
	{"JOIN-044/SentMessageConfirmedByPayloadHash", testMessagesSent},
}

// messagesOf returns the transaction's message repository. A Tx without
// [ports.MessageTx] fails the case unless the harness declares
// Caps.WithoutMessages, which skips it with what the omission costs.
func messagesOf(t *testing.T, h Harness, tx ports.Tx) ports.Messages {
	t.Helper()
	mt, ok := tx.(ports.MessageTx)
	switch {
	case ok:
		return mt.Messages()
	case h.Caps().WithoutMessages:
		t.Skip("Caps.WithoutMessages: the store's Tx does not implement ports.MessageTx, so the client SDK refuses this store (client.New fails with ErrConfig)")
	default:
		t.Fatalf("the store's Tx does not implement ports.MessageTx: the client SDK refuses such a store (client.New fails with ErrConfig); implement Messages() or declare Caps.WithoutMessages")
	}
	return nil
}

func testMessagesOnce(t *testing.T, h Harness) {
	s := open(t, h)
	g1, g2 := gid(1), gid(2)
	var ids []uint64
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		ms := messagesOf(t, h, tx)
		for i, m := range []ports.Message{
			{GroupID: g1, SequenceID: 7, Kind: ports.MessageApplication, SenderInbox: "a", Content: []byte("one"), SentAt: at(1)},
			{GroupID: g2, SequenceID: 8, Kind: ports.MessageApplication, SenderInbox: "b", Content: []byte("other group")},
			{GroupID: g1, SequenceID: 9, Kind: ports.MessageGroupUpdated, SenderInbox: "c", SenderInstallation: []byte{1, 2}, Epoch: 3, Content: []byte("two")},
		} {
			st, ins, err := ms.Insert(ctx, m)
			if err != nil || !ins {
				t.Fatalf("insert %d = %v, %v", i, ins, err)
			}
			if n := len(ids); n > 0 && st.ID <= ids[n-1] {
				t.Errorf("insert %d: id %d not above %d", i, st.ID, ids[n-1])
			}
			ids = append(ids, st.ID)
		}
		return nil
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		ms := messagesOf(t, h, tx)
		st, ins, err := ms.Insert(ctx, ports.Message{GroupID: g1, SequenceID: 7, Kind: ports.MessageApplication, SenderInbox: "a", Content: []byte("one"), SentAt: at(2)})
		if err != nil || ins || st.ID != ids[0] || string(st.Content) != "one" {
			t.Errorf("second insert of the same message at the same position = %+v, %v, %v; want the stored one, not inserted", st, ins, err)
		}
		got, err := ms.List(ctx, g1, 0, 0)
		if err != nil {
			return err
		}
		if len(got) != 2 || got[0].SequenceID != 7 || got[1].SequenceID != 9 {
			t.Fatalf("List = %+v; want the group's two messages in order", got)
		}
		m := got[1]
		if m.Kind != ports.MessageGroupUpdated || m.SenderInbox != "c" || !bytes.Equal(m.SenderInstallation, []byte{1, 2}) || m.Epoch != 3 || string(m.Content) != "two" {
			t.Errorf("read back %+v", m)
		}
		if !got[0].SentAt.Equal(at(1)) {
			t.Errorf("SentAt = %v, want %v", got[0].SentAt, at(1))
		}
		page, err := ms.List(ctx, g1, got[0].SequenceID, 1)
		if err != nil || len(page) != 1 || page[0].ID != got[1].ID {
			t.Errorf("List after the first, limit 1 = %+v, %v", page, err)
		}
		// Topic order, not storage order: a message stored later at a lower
		// sequence id comes first, and unconfirmed sent messages last.
		if _, _, err := ms.Insert(ctx, ports.Message{GroupID: g1, Kind: ports.MessageApplication, Own: true, PayloadHash: []byte{1}}); err != nil {
			return err
		}
		if _, _, err := ms.Insert(ctx, ports.Message{GroupID: g1, SequenceID: 3, Kind: ports.MessageApplication}); err != nil {
			return err
		}
		got, err = ms.List(ctx, g1, 0, 0)
		if err != nil {
			return err
		}
		var order []uint64
		for _, m := range got {
			order = append(order, m.SequenceID)
		}
		if len(order) != 4 || order[0] != 3 || order[1] != 7 || order[2] != 9 || order[3] != 0 {
			t.Errorf("List order by sequence id = %v; want [3 7 9 0]", order)
		}
		return nil
	})
}

func testMessagesSent(t *testing.T, h Harness) {
	s := open(t, h)
	g := gid(3)
	hash := bytes.Repeat([]byte{9}, 32)
	var id uint64
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		ms := messagesOf(t, h, tx)
		// Two unconfirmed sent messages may share sequence id 0.
		for i := 0; i < 2; i++ {
			h := append([]byte(nil), hash...)
			h[0] += byte(i)
			st, ins, err := ms.Insert(ctx, ports.Message{GroupID: g, Kind: ports.MessageApplication, Own: true, PayloadHash: h, Content: []byte{byte(i)}})
			if err != nil || !ins {
				t.Fatalf("insert unconfirmed %d = %v, %v", i, ins, err)
			}
			if i == 0 {
				id = st.ID
			}
		}
		return nil
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		ms := messagesOf(t, h, tx)
		m, err := ms.ByPayloadHash(ctx, g, hash)
		if err != nil || m.ID != id {
			t.Fatalf("ByPayloadHash = %+v, %v; want message %d", m, err, id)
		}
		if _, err := ms.ByPayloadHash(ctx, gid(4), hash); !errors.Is(err, ports.ErrNotFound) {
			t.Errorf("ByPayloadHash in another group = %v, want ErrNotFound", err)
		}
		if err := ms.SetSequenceID(ctx, id, 42, at(5)); err != nil {
			return err
		}
		if m, err := ms.ByPayloadHash(ctx, g, hash); err != nil || m.ID != id || m.SequenceID != 42 {
			t.Errorf("ByPayloadHash after confirmation = %+v, %v; want message %d at 42", m, err, id)
		}
		// Another message at the confirmed position is stored beside it
		// (COMP-466); the sent message keeps its confirmation.
		st, ins, err := ms.Insert(ctx, ports.Message{GroupID: g, SequenceID: 42, Kind: ports.MessageApplication})
		if err != nil || !ins || st.ID == id {
			t.Errorf("another message at the confirmed position = %+v, %v, %v; want it stored beside", st, ins, err)
		}
		if m, err := ms.ByPayloadHash(ctx, g, hash); err != nil || m.SequenceID != 42 || !m.SentAt.Equal(at(5)) {
			t.Errorf("sent message after another at its position = %+v, %v", m, err)
		}
		if err := ms.SetSequenceID(ctx, id+100, 43, at(6)); !errors.Is(err, ports.ErrNotFound) {
			t.Errorf("SetSequenceID of an absent message = %v, want ErrNotFound", err)
		}
		return nil
	})
}

// COMP-466: a delivery service restored from a backup without restore
// mode hands out an id a stored message already has. A different message
// received at that id is stored beside it, and a sent message confirmed
// at it is confirmed; both are listed, in storage order at their shared
// position. The same message inserted again is still not stored twice.
func testMessagesReissued(t *testing.T, h Harness) {
	s := open(t, h)
	g := gid(4)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		ms := messagesOf(t, h, tx)
		old := ports.Message{GroupID: g, SequenceID: 20, Kind: ports.MessageApplication, SenderInbox: "a", SenderInstallation: []byte{1}, Epoch: 2, Content: []byte("before the restore")}
		if _, ins, err := ms.Insert(ctx, old); err != nil || !ins {
			t.Fatalf("insert = %v, %v", ins, err)
		}
		reissued := old
		reissued.Content = []byte("after the restore")
		st, ins, err := ms.Insert(ctx, reissued)
		if err != nil || !ins || string(st.Content) != "after the restore" {
			t.Fatalf("a different message at a reissued id = %+v, %v, %v; want it stored", st, ins, err)
		}
		if _, ins, err := ms.Insert(ctx, reissued); err != nil || ins {
			t.Fatalf("the same message again = %v, %v; want the stored one", ins, err)
		}
		sent, _, err := ms.Insert(ctx, ports.Message{GroupID: g, Kind: ports.MessageApplication, Own: true, PayloadHash: []byte{4}, Content: []byte("sent")})
		if err != nil {
			return err
		}
		if err := ms.SetSequenceID(ctx, sent.ID, 20, at(3)); err != nil {
			t.Fatalf("confirming a sent message at a reissued id: %v", err)
		}
		got, err := ms.List(ctx, g, 0, 0)
		if err != nil {
			return err
		}
		var texts []string
		for _, m := range got {
			if m.SequenceID != 20 {
				t.Errorf("message %q at %d, want 20", m.Content, m.SequenceID)
			}
			texts = append(texts, string(m.Content))
		}
		if len(texts) != 3 || texts[0] != "before the restore" || texts[1] != "after the restore" || texts[2] != "sent" {
			t.Errorf("List = %q; want the three messages in storage order", texts)
		}
		return nil
	})
}
