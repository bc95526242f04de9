package gormstore

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/regroup-mls/regroup/ports"
)

var _ ports.IdentityCacheBatch = identityCache{}

// The limits of one statement of the batched identity-cache calls
// (COMP-586): at most 900 bound values, under the smallest limit SQLite
// builds have had (999; PostgreSQL takes 65,535), and at most
// identityPutBytes of update bytes in one INSERT, so that a batch of
// large updates does not become one statement of hundreds of megabytes
// (a single larger update still goes, alone).
const (
	identityListChunk = 900 // inboxes per SELECT, one value each
	identityPutChunk  = 300 // records per INSERT, three values each
	identityPutBytes  = 8 << 20
)

// identityKey names one stored identity update.
type identityKey struct {
	inbox string
	seq   uint64
}

// ListMany implements [ports.IdentityCacheBatch]: one SELECT per
// identityListChunk distinct inboxes.
func (c identityCache) ListMany(ctx context.Context, inboxIDs []string) ([][]ports.IdentityUpdateRecord, error) {
	const op = "list identity updates of many inboxes"
	out := make([][]ports.IdentityUpdateRecord, len(inboxIDs))
	at := make(map[string][]int, len(inboxIDs)) // each inbox's positions in inboxIDs
	var distinct []string
	for i, id := range inboxIDs {
		if _, ok := at[id]; !ok {
			distinct = append(distinct, id)
		}
		at[id] = append(at[id], i)
	}
	for len(distinct) > 0 {
		n := min(len(distinct), identityListChunk)
		if err := c.listChunk(ctx, distinct[:n], at, out); err != nil {
			return nil, fail(ctx, op, err)
		}
		distinct = distinct[n:]
	}
	for i := range out {
		if out[i] == nil {
			out[i] = []ports.IdentityUpdateRecord{}
		}
	}
	return out, nil
}

// listChunk reads the updates of the inboxes into out at each inbox's
// positions; an inbox named more than once gets its own copy of the
// bytes at every position.
func (c identityCache) listChunk(ctx context.Context, inboxes []string, at map[string][]int, out [][]ports.IdentityUpdateRecord) error {
	pg := c.t.postgres()
	var q strings.Builder
	q.WriteString("SELECT inbox_id, sequence_id, update_bytes FROM identity_updates WHERE inbox_id IN (")
	args := make([]any, len(inboxes))
	for i, id := range inboxes {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString(bindVar(pg, i+1))
		args[i] = id
	}
	q.WriteString(") ORDER BY inbox_id, sequence_id")
	rows, err := c.t.query(ctx, q.String(), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			inbox string
			seq   int64
			b     []byte
		)
		if err := rows.Scan(&inbox, &seq, &b); err != nil {
			return err
		}
		for k, i := range at[inbox] {
			u := nonEmpty(b)
			if k > 0 && u != nil {
				u = append([]byte(nil), u...)
			}
			out[i] = append(out[i], ports.IdentityUpdateRecord{InboxID: inbox, SequenceID: uint64(seq), Update: u})
		}
	}
	return rows.Err()
}

// PutMany implements [ports.IdentityCacheBatch]: every record is checked
// as Put checks it before any is written; the first record of each inbox
// and sequence id then goes into a multi-row INSERT ... ON CONFLICT DO
// NOTHING RETURNING the keys it inserted, one per identityPutChunk
// records (or identityPutBytes of updates).
func (c identityCache) PutMany(ctx context.Context, recs []ports.IdentityUpdateRecord) ([]bool, error) {
	const op = "put identity updates"
	first := make(map[identityKey]int, len(recs))
	var todo []int // the first record of each key, in order
	for i, r := range recs {
		if r.InboxID == "" {
			return nil, fmt.Errorf("%s: record %d: empty inbox id: %w", op, i, ErrBadRecord)
		}
		if err := checkU64(op+": record "+strconv.Itoa(i), r.SequenceID); err != nil {
			return nil, err
		}
		k := identityKey{r.InboxID, r.SequenceID}
		if _, dup := first[k]; !dup {
			first[k] = i
			todo = append(todo, i)
		}
	}
	inserted := make([]bool, len(recs))
	for len(todo) > 0 {
		n, size := 0, 0
		for n < len(todo) && n < identityPutChunk {
			size += len(recs[todo[n]].Update)
			if n > 0 && size > identityPutBytes {
				break
			}
			n++
		}
		rows, err := c.insertChunk(ctx, recs, todo[:n])
		if err == nil {
			err = markInserted(rows, first, inserted)
		}
		if err != nil {
			return nil, fail(ctx, op, err)
		}
		todo = todo[n:]
	}
	return inserted, nil
}

// insertChunk inserts the records at the indexes and returns the keys of
// those it inserted.
func (c identityCache) insertChunk(ctx context.Context, recs []ports.IdentityUpdateRecord, idx []int) (*sql.Rows, error) {
	pg := c.t.postgres()
	var q strings.Builder
	q.WriteString("INSERT INTO identity_updates (inbox_id, sequence_id, update_bytes) VALUES ")
	args := make([]any, 0, 3*len(idx))
	for k, i := range idx {
		if k > 0 {
			q.WriteByte(',')
		}
		n := len(args)
		q.WriteString("(" + bindVar(pg, n+1) + "," + bindVar(pg, n+2) + "," + bindVar(pg, n+3) + ")")
		r := recs[i]
		args = append(args, r.InboxID, int64(r.SequenceID), nonEmpty(r.Update))
	}
	q.WriteString(" ON CONFLICT (inbox_id, sequence_id) DO NOTHING RETURNING inbox_id, sequence_id")
	return c.t.query(ctx, q.String(), args...)
}

// markInserted sets inserted at the first record of every key rows
// returns, and closes rows.
func markInserted(rows *sql.Rows, first map[identityKey]int, inserted []bool) error {
	defer rows.Close()
	for rows.Next() {
		var (
			inbox string
			seq   int64
		)
		if err := rows.Scan(&inbox, &seq); err != nil {
			return err
		}
		i, ok := first[identityKey{inbox, uint64(seq)}]
		if !ok {
			return fmt.Errorf("the database returned %s at %d, which the statement did not insert", inbox, seq)
		}
		inserted[i] = true
	}
	return rows.Err()
}

// bindVar is the placeholder of the n-th value (from 1) of a statement
// run as text: $n on PostgreSQL, ? elsewhere.
func bindVar(pg bool, n int) string {
	if pg {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}
