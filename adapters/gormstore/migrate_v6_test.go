package gormstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// COMP-554 across the upgrade: a store recorded at step 5 (the index on
// group and sequence id held only confirmed messages) opens, a message
// read again at a stored sequence id is recognised, a reissued id still
// takes a second message, and the lookup Insert makes is planned on the
// index of group and sequence id instead of reading the group's messages.
func TestCOMP554_Step6_RecordedStoreFindsMessagesBySequenceID(t *testing.T) {
	ctx := context.Background()
	st := openRecorded(t, "schema-v5.db")
	g := []byte("group-position-v5")
	at := time.Unix(1764700000, 0).UTC()
	err := st.Tx(ctx, func(tx ports.Tx) error {
		ms := tx.(ports.MessageTx).Messages()
		same := ports.Message{GroupID: g, SequenceID: 12, Kind: ports.MessageApplication, SenderInbox: "inbox-b",
			SenderInstallation: []byte("inst-b"), Epoch: 4, Content: []byte("text reissued"), SentAt: at}
		m, inserted, err := ms.Insert(ctx, same)
		if err != nil {
			return err
		}
		if inserted || m.ID != 6 {
			t.Errorf("the recorded message at id 12 read again: inserted %v as %d, want the stored message 6", inserted, m.ID)
		}
		other := same
		other.Content = []byte("another reissue")
		if _, inserted, err = ms.Insert(ctx, other); err != nil {
			return err
		}
		if !inserted {
			t.Error("a third message at the reissued id 12 was not stored")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := queryPlan(t, st, "SELECT * FROM messages WHERE group_id = ? AND sequence_id = ? ORDER BY id", g, 12); !strings.Contains(got, "messages_topic_position (group_id=? AND sequence_id=?)") {
		t.Errorf("Insert's lookup is planned as %q, want a search of messages_topic_position on both columns", got)
	}
}
