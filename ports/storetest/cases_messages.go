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
		st, ins, err := ms.Insert(ctx, ports.Message{GroupID: g1, SequenceID: 7, Kind: ports.MessageApplication, Content: []byte("again")})
		if err != nil || ins || st.ID != ids[0] || string(st.Content) != "one" {
			t.Errorf("second insert at the same position = %+v, %v, %v; want the stored one, not inserted", st, ins, err)
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
		st, ins, err := ms.Insert(ctx, ports.Message{GroupID: g, SequenceID: 42, Kind: ports.MessageApplication})
		if err != nil || ins || st.ID != id || !st.SentAt.Equal(at(5)) {
			t.Errorf("insert at the confirmed position = %+v, %v, %v; want the sent message", st, ins, err)
		}
		if err := ms.SetSequenceID(ctx, id+100, 43, at(6)); !errors.Is(err, ports.ErrNotFound) {
			t.Errorf("SetSequenceID of an absent message = %v, want ErrNotFound", err)
		}
		return nil
	})
}
