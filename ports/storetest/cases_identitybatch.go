package storetest

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

var identityBatchCases = []testCase{
	{"COMP-585/IdentityCacheListManyAsList", testIdentityListMany},
	{"COMP-585/IdentityCachePutManyAsPutInTurn", testIdentityPutMany},
}

// identityBatch skips the case, naming the interface, when s's identity
// cache does not implement ports.IdentityCacheBatch.
func identityBatch(t *testing.T, s ports.Store) {
	t.Helper()
	var has bool
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		_, has = tx.IdentityCache().(ports.IdentityCacheBatch)
		return nil
	})
	if !has {
		t.Skip("the store's IdentityCache does not implement ports.IdentityCacheBatch (optional)")
	}
}

// bulkInboxes is more inboxes than one statement of a database with a
// limit of 999 bound values can name.
const bulkInboxes = 1000

func bulkInbox(i int) string { return fmt.Sprintf("bulk-%04d", i) }

// COMP-585: ListMany returns, for every inbox in the caller's order, what
// List through 2^63-1 returns: ascending sequence ids compared as numbers,
// no inbox that merely starts with the name, an empty list for an inbox
// with none, more inboxes than one statement binds, and an inbox named
// twice in two copies that share no memory.
func testIdentityListMany(t *testing.T, h Harness) {
	s := open(t, h)
	identityBatch(t, s)
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		c := tx.IdentityCache()
		for _, q := range []uint64{5, 1, 10, 9, 3, 1 << 40} {
			if _, err := c.Put(ctx, ports.IdentityUpdateRecord{InboxID: "inbox-a", SequenceID: q, Update: fmt.Appendf(nil, "a@%d", q)}); err != nil {
				return err
			}
		}
		for _, r := range []ports.IdentityUpdateRecord{{InboxID: "inbox-ab", SequenceID: 7, Update: []byte("ab")}, {InboxID: "inbox-b", SequenceID: 20, Update: []byte("b")}} {
			if _, err := c.Put(ctx, r); err != nil {
				return err
			}
		}
		for i := range bulkInboxes {
			if _, err := c.Put(ctx, ports.IdentityUpdateRecord{InboxID: bulkInbox(i), SequenceID: uint64(1000 + i), Update: []byte{byte(i), byte(i >> 8)}}); err != nil {
				return err
			}
		}
		return nil
	})
	names := []string{"inbox-b", "nobody", "inbox-a"}
	for i := bulkInboxes - 1; i >= 0; i-- {
		names = append(names, bulkInbox(i))
	}
	names = append(names, "inbox-a", "inbox", "inbox-ab")
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		c := tx.IdentityCache()
		got, err := c.(ports.IdentityCacheBatch).ListMany(ctx, names)
		if err != nil {
			return err
		}
		if len(got) != len(names) {
			t.Fatalf("ListMany of %d inboxes returned %d lists", len(names), len(got))
		}
		for i, inbox := range names {
			want, err := c.List(ctx, inbox, math.MaxInt64)
			if err != nil {
				return err
			}
			if !equal(got[i], want) {
				t.Errorf("ListMany[%d] (%s):\n got  %s\n want %s (List)", i, inbox, show(got[i]), show(want))
			}
		}
		var seqs []uint64
		for _, r := range got[2] {
			seqs = append(seqs, r.SequenceID)
		}
		expect(t, "ListMany of inbox-a, ascending as numbers", seqs, []uint64{1, 3, 5, 9, 10, 1 << 40})
		if len(got[1]) != 0 || len(got[len(got)-2]) != 0 {
			t.Errorf("inboxes with no update got %s and %s, want empty lists", show(got[1]), show(got[len(got)-2]))
		}
		twice := got[len(got)-3]
		if len(twice) > 0 && len(got[2]) > 0 {
			got[2][0].Update[0] ^= 0xff
			if twice[0].Update[0] != 'a' {
				t.Errorf("the two lists of an inbox named twice share memory")
			}
		}
		empty, err := c.(ports.IdentityCacheBatch).ListMany(ctx, nil)
		if err != nil || len(empty) != 0 {
			t.Errorf("ListMany of no inbox = %s, %v; want none", show(empty), err)
		}
		return nil
	})
}

// COMP-585: PutMany answers, record by record, what Put of each in turn
// answers — computed here from the keys already stored and those earlier
// in the call — and keeps the first record of every inbox and sequence
// id, whether stored before the call or earlier in it, over more records
// than one statement binds; what it stored is the caller's bytes at the
// time of the call.
func testIdentityPutMany(t *testing.T, h Harness) {
	s := open(t, h)
	identityBatch(t, s)
	rec := func(inbox string, seq uint64, update string) ports.IdentityUpdateRecord {
		return ports.IdentityUpdateRecord{InboxID: inbox, SequenceID: seq, Update: []byte(update)}
	}
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		_, err := tx.IdentityCache().Put(ctx, rec("inbox-a", 5, "first"))
		return err
	})
	recs := []ports.IdentityUpdateRecord{
		rec("inbox-a", 5, "second"), rec("inbox-a", 1, "one"), rec("inbox-b", 1<<40, "b"),
		rec("inbox-a", 1, "other"), rec("inbox-a", 5, "third"), rec("inbox-ab", 5, "ab"),
	}
	for i := range bulkInboxes {
		recs = append(recs, rec(bulkInbox(i/2), uint64(i+1), fmt.Sprintf("bulk %d", i)))
	}
	recs = append(recs, rec(bulkInbox(0), 1, "again"), rec(bulkInbox(0), 2, "again"))
	type key struct {
		inbox string
		seq   uint64
	}
	held := map[key]bool{{"inbox-a", 5}: true}
	want := make([]bool, len(recs))
	for i, r := range recs {
		k := key{r.InboxID, r.SequenceID}
		want[i], held[k] = !held[k], true
	}
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		b := tx.IdentityCache().(ports.IdentityCacheBatch)
		got, err := b.PutMany(ctx, recs)
		if err != nil {
			return err
		}
		expect(t, "PutMany's inserted, record by record", got, want)
		recs[1].Update[0] = 'X' // the caller's buffer after the call
		none, err := b.PutMany(ctx, nil)
		if err != nil || len(none) != 0 {
			t.Errorf("PutMany of no record = %v, %v; want none", none, err)
		}
		return nil
	})
	must(t, s, func(ctx context.Context, tx ports.Tx) error {
		c := tx.IdentityCache()
		a, err := c.List(ctx, "inbox-a", math.MaxInt64)
		if err != nil {
			return err
		}
		expect(t, "inbox-a after PutMany", a, []ports.IdentityUpdateRecord{rec("inbox-a", 1, "one"), rec("inbox-a", 5, "first")})
		if hi, err := c.Highest(ctx, "inbox-b"); err != nil || hi != 1<<40 {
			t.Errorf("Highest(inbox-b) = %d, %v; want 2^40", hi, err)
		}
		for i := range bulkInboxes / 2 {
			got, err := c.List(ctx, bulkInbox(i), math.MaxInt64)
			if err != nil {
				return err
			}
			want := []ports.IdentityUpdateRecord{rec(bulkInbox(i), uint64(2*i+1), fmt.Sprintf("bulk %d", 2*i)), rec(bulkInbox(i), uint64(2*i+2), fmt.Sprintf("bulk %d", 2*i+1))}
			if !equal(got, want) {
				t.Fatalf("%s after PutMany:\n got  %s\n want %s", bulkInbox(i), show(got), show(want))
			}
		}
		return nil
	})
}
