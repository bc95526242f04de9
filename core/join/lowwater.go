package join

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/regroup-mls/regroup/ports"
)

// DefaultRescanInterval is how often a pass re-reads the welcome topic
// from the low-water mark (COMP-291).
const DefaultRescanInterval = 24 * time.Hour

// Keys of the low-water mark in the Blobs namespace regroup/join
// (COMP-291). A store written before they existed holds none: it loads as
// a mark of 0 and no rescan, so its first pass re-reads the topic once.
const (
	keyFloor  = "floor"
	keyHigh   = "high"
	keyRescan = "rescan"
)

// marks are the durable positions a pass keeps beside the cursor.
type marks struct {
	// floor is the low-water mark: every envelope at or below it was read,
	// and it lies below an authenticated Welcome that a later pass found
	// above it, so one authenticated Welcome at an extreme id never moves
	// it (COMP-291).
	floor uint64
	// high is the highest id of an authenticated Welcome first read by an
	// earlier pass.
	high uint64
	// rescan is when a pass last re-read the topic from floor; zero when
	// none did.
	rescan time.Time
}

func getU64(ctx context.Context, tx ports.Tx, key string) (uint64, error) {
	b, err := tx.Blobs().Get(ctx, nsJoin, key)
	if errors.Is(err, ports.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("stored welcome %s of %d bytes: %w", key, len(b), ports.ErrInvalid)
	}
	return binary.BigEndian.Uint64(b), nil
}

func putU64(ctx context.Context, tx ports.Tx, key string, v uint64) error {
	return tx.Blobs().Put(ctx, nsJoin, key, binary.BigEndian.AppendUint64(nil, v))
}

func loadMarks(ctx context.Context, tx ports.Tx) (m marks, err error) {
	if m.floor, err = getU64(ctx, tx, keyFloor); err != nil {
		return m, err
	}
	if m.high, err = getU64(ctx, tx, keyHigh); err != nil {
		return m, err
	}
	at, err := getU64(ctx, tx, keyRescan)
	if err != nil {
		return m, err
	}
	if at != 0 {
		m.rescan = time.Unix(0, int64(at)).UTC()
	}
	return m, nil
}

// saveMarks stores m, never moving floor or high down.
func saveMarks(ctx context.Context, tx ports.Tx, m marks) error {
	old, err := loadMarks(ctx, tx)
	if err != nil {
		return err
	}
	if m.floor > old.floor {
		if err := putU64(ctx, tx, keyFloor, m.floor); err != nil {
			return err
		}
	}
	if m.high > old.high {
		if err := putU64(ctx, tx, keyHigh, m.high); err != nil {
			return err
		}
	}
	if m.rescan.After(old.rescan) {
		return putU64(ctx, tx, keyRescan, uint64(m.rescan.UnixNano()))
	}
	return nil
}

// Floor returns the low-water mark of the welcome topic (COMP-291).
func (r *Receiver) Floor(ctx context.Context) (floor uint64, err error) {
	err = r.o.Store.Tx(ctx, func(tx ports.Tx) error {
		m, err := loadMarks(ctx, tx)
		floor = m.floor
		return err
	})
	return floor, err
}

// advance returns the marks after a pass that left the cursor at cur and
// read for the first time authenticated Welcomes up to newest (0 when
// none): the floor moves to the lowest of the cursor, the previous high
// and newest, so it passes an authenticated Welcome only once a later pass
// found one above it.
func (m marks) advance(cur, newest uint64) marks {
	if newest == 0 {
		return m
	}
	m.floor = max(m.floor, min(cur, m.high, newest))
	m.high = max(m.high, newest)
	return m
}
