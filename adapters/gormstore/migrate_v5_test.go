package gormstore_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"

	"github.com/regroup-mls/regroup/adapters/sqlite"
	"github.com/regroup-mls/regroup/ports"
)

// COMP-552 across the upgrade: a store recorded at step 4 (own messages
// found through an index on the payload hash alone) opens, its messages
// are found by group and payload hash, and the lookup no longer reads
// the group's messages one by one: SQLite plans it on the index of step
// 5.
func TestCOMP552_Step5_RecordedStoreFindsMessagesByGroupAndHash(t *testing.T) {
	ctx := context.Background()
	st := openRecorded(t, "schema-v4.db")
	g := []byte("group-payload-v4")
	err := st.Tx(ctx, func(tx ports.Tx) error {
		ms := tx.(ports.MessageTx).Messages()
		for i := range 3 {
			h := sha256.Sum256([]byte(fmt.Sprintf("payload %d", i)))
			m, err := ms.ByPayloadHash(ctx, g, h[:])
			if err != nil {
				return fmt.Errorf("message %d: %w", i, err)
			}
			if string(m.Content) != fmt.Sprintf("text %d", i) || (i == 0) != (m.SequenceID == 7) {
				t.Errorf("message %d read as %q at %d", i, m.Content, m.SequenceID)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := queryPlan(t, st, "SELECT * FROM messages WHERE group_id = ? AND payload_hash = ? AND own ORDER BY id LIMIT 1",
		g, []byte("h")); !strings.Contains(got, "messages_by_payload (group_id=? AND payload_hash=?)") {
		t.Errorf("ByPayloadHash's query is planned as %q, want a search of messages_by_payload on both columns", got)
	}
}

// queryPlan returns SQLite's plan of query on st, its steps joined by "; ".
func queryPlan(t *testing.T, st *sqlite.Store, query string, args ...any) string {
	t.Helper()
	var plan []struct {
		ID, Parent, Notused int
		Detail              string
	}
	if err := st.DB().Raw("EXPLAIN QUERY PLAN "+query, args...).Scan(&plan).Error; err != nil {
		t.Fatal(err)
	}
	details := make([]string, 0, len(plan))
	for _, p := range plan {
		details = append(details, p.Detail)
	}
	return strings.Join(details, "; ")
}
