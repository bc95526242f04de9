package gormstore_test

import (
	"context"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

// COMP-466 across the upgrade: a store recorded before step 4 (whose
// message index was unique per group and sequence id) opens, and two
// different messages at one sequence id are then both stored.
func TestCOMP466_Step4_RecordedStoreKeepsReissuedMessages(t *testing.T) {
	ctx := context.Background()
	st := openRecorded(t, "schema-v1.db")
	g := []byte("group-reissued-0")
	err := st.Tx(ctx, func(tx ports.Tx) error {
		ms := tx.(ports.MessageTx).Messages()
		for _, text := range []string{"before", "after"} {
			if _, ins, err := ms.Insert(ctx, ports.Message{GroupID: g, SequenceID: 5, Kind: ports.MessageApplication, Content: []byte(text)}); err != nil || !ins {
				t.Fatalf("insert %q at 5 = %v, %v", text, ins, err)
			}
		}
		got, err := ms.List(ctx, g, 0, 0)
		if err != nil || len(got) != 2 {
			t.Fatalf("List = %v, %v; want both messages", got, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
