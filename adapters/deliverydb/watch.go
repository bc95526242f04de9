package deliverydb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/regroup-mls/regroup/ports"
)

var _ ports.EnvelopeWatcher = (*Store)(nil)

// channel is the PostgreSQL NOTIFY channel of the store's schema.
func channel(schema string) string {
	if schema == "" {
		return "regroup_delivery"
	}
	sum := sha256.Sum256([]byte(schema))
	return "regroup_delivery_" + hex.EncodeToString(sum[:8])
}

// Watch implements [ports.EnvelopeWatcher] on PostgreSQL opened with
// Options.Notify: every Append sends NOTIFY with its topics in its
// transaction, so a report arrives only after the commit. Watch LISTENs on
// its own connection, reconnecting after a failure, and reports
// changed(nil) each time it starts listening, because appends before that
// were not reported. On SQLite,
// or without Options.Notify, it fails at once.
func (s *Store) Watch(ctx context.Context, changed func(topic []byte)) error {
	if s.dialect != "postgres" || !s.notify {
		return errors.New("watch: needs PostgreSQL opened with Options.Notify")
	}
	backoff := 50 * time.Millisecond
	for {
		err := s.listen(ctx, changed)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
		if err != nil {
			s.hooks.dbError("watch")
		}
		s.hooks.retry("watch") // listen reports changed(nil) once listening again
	}
}

func (s *Store) listen(ctx context.Context, changed func([]byte)) error {
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `LISTEN "`+channel(s.schema)+`"`); err != nil {
		return err
	}
	// Appends committed before LISTEN took effect were not reported.
	changed(nil)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		topic, err := hex.DecodeString(n.Payload)
		if err != nil {
			changed(nil)
			continue
		}
		changed(topic)
	}
}
