package deliverydb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// appendFunction is PostgreSQL's append (migration 4), one statement
// that runs as its own transaction: lock the rows of the batch's topics in
// the order given (ascending), look up each envelope's dedup key, take one
// id per new envelope from the sequence in input order, insert the new
// envelopes, record each topic's highest id and, when channel is not
// empty, NOTIFY the topics that received an envelope. It returns one row
// per envelope in input order: the new id, or the stored envelope's id
// negated when its dedup key was already stored on its topic; then one
// last row, the microseconds it waited for the topic locks.
//
// env_topics gives, per envelope, the 1-based index of its topic in
// topics. A dedup lookup runs while the topic's row is locked, so two
// appends of one key to one topic cannot both insert it.
const appendFunction = `CREATE FUNCTION delivery_append(topics bytea[], env_topics integer[], envelopes bytea[],
	stamps bigint[], expiries bigint[], dedups bytea[], channel text)
RETURNS SETOF bigint LANGUAGE plpgsql AS $fn$
DECLARE
	ids bigint[];
	i integer;
	stored bigint;
	started timestamptz := clock_timestamp();
	waited bigint;
BEGIN
	FOR i IN 1..cardinality(topics) LOOP
		-- Lock the row; create (and so lock) it when the topic is new. A
		-- concurrent creator makes ON CONFLICT wait for it, then lock.
		PERFORM 1 FROM delivery_topics WHERE topic = topics[i] FOR UPDATE;
		IF NOT FOUND THEN
			INSERT INTO delivery_topics (topic, last_id) VALUES (topics[i], 0)
				ON CONFLICT (topic) DO UPDATE SET last_id = delivery_topics.last_id;
		END IF;
	END LOOP;
	waited := (extract(epoch FROM clock_timestamp() - started) * 1000000)::bigint;
	FOR i IN 1..cardinality(env_topics) LOOP
		stored := NULL;
		IF dedups[i] IS NOT NULL THEN
			SELECT sequence_id INTO stored FROM delivery_envelopes
				WHERE topic = topics[env_topics[i]] AND dedup_key = dedups[i] LIMIT 1;
		END IF;
		IF stored IS NULL THEN
			ids[i] := nextval('delivery_sequence_ids');
		ELSE
			ids[i] := -stored;
		END IF;
	END LOOP;
	INSERT INTO delivery_envelopes (topic, sequence_id, server_timestamp_ns, expires_at_ns, envelope, dedup_key)
		SELECT topics[u.t], u.id, u.ts, u.ex, u.env, u.dk
		FROM unnest(env_topics, ids, stamps, expiries, envelopes, dedups) AS u(t, id, ts, ex, env, dk)
		WHERE u.id > 0;
	UPDATE delivery_topics AS d SET last_id = m.last
		FROM (SELECT u.t, max(u.id) FROM unnest(env_topics, ids) AS u(t, id) WHERE u.id > 0 GROUP BY u.t) AS m(t, last)
		WHERE d.topic = topics[m.t];
	IF channel <> '' THEN
		PERFORM pg_notify(channel, encode(topics[m.t], 'hex'))
			FROM (SELECT DISTINCT u.t FROM unnest(env_topics, ids) AS u(t, id) WHERE u.id > 0) AS m(t);
	END IF;
	RETURN QUERY SELECT u.id FROM unnest(ids) WITH ORDINALITY AS u(id, o) ORDER BY u.o;
	RETURN NEXT waited;
END
$fn$`

// pgAppend stores the requests of one group in one call of
// delivery_append and reports each request's ids (or its error) in it.
// Envelopes whose dedup key comes earlier in the group take that
// envelope's id. When the call fails for a group of several requests,
// each request is tried alone, so one bad request fails only itself.
func (s *Store) pgAppend(batch []*appendReq) error {
	live := batch[:0:0]
	for _, r := range batch {
		if r.ctx.Err() != nil {
			r.err = r.ctx.Err()
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return nil
	}
	err := s.pgAppendOnce(live)
	var pgErr *pgconn.PgError
	if err == nil || len(live) == 1 || !errors.As(err, &pgErr) {
		// Only an error PostgreSQL answered says the statement rolled
		// back; after a lost connection the group may have committed,
		// and trying its appends again would store them twice.
		for _, r := range live {
			if err != nil {
				r.ids, r.err = nil, err
			}
		}
		return err
	}
	s.hooks.retry("append")
	for _, r := range live {
		r.ids = nil
		r.err = s.pgAppendOnce([]*appendReq{r})
	}
	return err
}

// queryer runs a query on a pool or inside a transaction.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// pgAppendOnce runs delivery_append over reqs and fills in their ids.
func (s *Store) pgAppendOnce(reqs []*appendReq) error { return s.pgAppendOn(s.sqlDB, reqs) }

// pgAppendOn runs delivery_append over reqs on q (the pool, or the
// transaction of [Store.AppendWithState]) and fills in their ids.
func (s *Store) pgAppendOn(q queryer, reqs []*appendReq) error {
	type ref struct{ req, env int }
	var (
		topicIndex = map[string]int{}
		topics     []string
		refs       []ref
		first      = map[string]int{} // dedup: topic and key → position in refs
		dupOf      = map[int]int{}    // position in refs → earlier position with the same key
	)
	for ri, r := range reqs {
		for ei, e := range r.envs {
			if _, ok := topicIndex[string(e.Topic)]; !ok {
				topicIndex[string(e.Topic)] = 0
				topics = append(topics, string(e.Topic))
			}
			if e.DedupKey != nil {
				k := fmt.Sprintf("%d:%s%s", len(e.Topic), e.Topic, e.DedupKey)
				if j, ok := first[k]; ok {
					dupOf[len(refs)] = j
					refs = append(refs, ref{ri, ei})
					continue
				}
				first[k] = len(refs)
			}
			refs = append(refs, ref{ri, ei})
		}
	}
	// Ascending topic order: two appends naming the same topics lock
	// them in the same order and cannot deadlock.
	sort.Strings(topics)
	topicArg := make([][]byte, len(topics))
	for i, t := range topics {
		topicIndex[t] = i + 1
		topicArg[i] = []byte(t)
	}
	n := len(refs) - len(dupOf)
	envTopics, envelopes := make([]int32, 0, n), make([][]byte, 0, n)
	stamps, expiries, dedups := make([]int64, 0, n), make([]int64, 0, n), make([][]byte, 0, n)
	slot := make([]int, len(refs)) // position in refs → row of the call
	for i, rf := range refs {
		if j, dup := dupOf[i]; dup {
			slot[i] = slot[j]
			continue
		}
		e := reqs[rf.req].envs[rf.env]
		slot[i] = len(envTopics)
		envTopics = append(envTopics, int32(topicIndex[string(e.Topic)]))
		envelopes = append(envelopes, e.Envelope)
		stamps = append(stamps, e.ServerTimestampNS)
		expiries = append(expiries, e.ExpiresAtNS)
		dedups = append(dedups, e.DedupKey)
	}
	channelName := ""
	if s.notify {
		channelName = channel(s.schema)
	}
	// The statement is not bound to any request's ctx: once sent, its
	// outcome is what every request of the group reports (COMP-142).
	rows, err := q.QueryContext(context.Background(),
		`SELECT * FROM delivery_append($1, $2, $3, $4, $5, $6, $7)`,
		topicArg, envTopics, envelopes, stamps, expiries, dedups, channelName)
	if err != nil {
		s.hooks.dbError("append")
		return fmt.Errorf("append: %w", err)
	}
	defer rows.Close()
	out := make([]int64, 0, len(envTopics)+1)
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			s.hooks.dbError("append")
			return fmt.Errorf("append: %w", err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		s.hooks.dbError("append")
		return fmt.Errorf("append: %w", err)
	}
	if len(out) != len(envTopics)+1 {
		return fmt.Errorf("append: got %d ids for %d envelopes", len(out)-1, len(envTopics))
	}
	lockWait := time.Duration(out[len(out)-1]) * time.Microsecond
	for _, r := range reqs {
		r.ids = make([]uint64, len(r.envs))
		r.lockWait = lockWait
	}
	for i, rf := range refs {
		v := out[slot[i]]
		if v < 0 {
			v = -v
		}
		if v == 0 {
			return errors.New("append: the database returned id 0")
		}
		reqs[rf.req].ids[rf.env] = uint64(v)
	}
	return nil
}
