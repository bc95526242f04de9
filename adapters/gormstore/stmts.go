package gormstore

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache holds the statements the store prepares once and runs in
// many transactions: database/sql prepares each on a connection the first
// time a transaction of that connection runs it, and reuses it after, so
// the database parses and plans the statement once per connection instead
// of once per run.
type stmtCache struct {
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
}

// prepare prepares every query on pool. It runs when the store opens,
// before any transaction holds a connection: preparing on the pool takes
// a connection of its own, which a transaction on a one-connection pool
// (SQLite's) would wait for forever.
func (c *stmtCache) prepare(ctx context.Context, pool *sql.DB, queries ...string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stmts == nil {
		c.stmts = map[string]*sql.Stmt{}
	}
	for _, q := range queries {
		st, err := pool.PrepareContext(ctx, q)
		if err != nil {
			return err
		}
		c.stmts[q] = st
	}
	return nil
}

func (c *stmtCache) get(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stmts[query]
}

// close closes every prepared statement.
func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.stmts {
		st.Close()
	}
	c.stmts = nil
}

// stmt returns query prepared for this transaction: the store's
// statement bound to the transaction when the store prepared it and the
// transaction is a database/sql one, nil otherwise (run the query as text
// then).
func (t *tx) stmt(ctx context.Context, query string) *sql.Stmt {
	sqlTx, ok := t.db.Statement.ConnPool.(*sql.Tx)
	if !ok || t.s == nil {
		return nil
	}
	st := t.s.stmts.get(query)
	if st == nil {
		return nil
	}
	return sqlTx.StmtContext(ctx, st)
}

// query runs a statement that returns rows in the transaction, prepared
// once for the store.
func (t *tx) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	ctx = t.ctx(ctx)
	if st := t.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return t.db.Statement.ConnPool.QueryContext(ctx, query, args...)
}

// exec runs a statement in the transaction, prepared once for the store.
func (t *tx) exec(ctx context.Context, query string, args ...any) error {
	ctx = t.ctx(ctx)
	if st := t.stmt(ctx, query); st != nil {
		_, err := st.ExecContext(ctx, args...)
		return err
	}
	_, err := t.db.Statement.ConnPool.ExecContext(ctx, query, args...)
	return err
}

// postgres reports whether t runs on PostgreSQL, whose statements number
// their parameters.
func (t *tx) postgres() bool { return t.db.Dialector.Name() == "postgres" }

// dialectQuery returns the text of a statement for t's database.
func (t *tx) dialectQuery(sqlite, postgres string) string {
	if t.postgres() {
		return postgres
	}
	return sqlite
}
