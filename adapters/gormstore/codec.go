package gormstore

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"gorm.io/gorm/clause"
)

// Times are stored as Unix nanoseconds (0 for the zero time), which both
// dialects keep exactly; they read back in UTC. The representable range is
// the years 1678 to 2262, and the instant 1970-01-01T00:00:00Z reads back
// as the zero time.
func toNs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNs(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// nonEmpty normalizes an empty byte slice to nil, so NULL and an empty
// value read back alike on every dialect.
func nonEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// checkKey refuses an empty key part.
func checkKey(op, name string, b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("%s: empty %s: %w", op, name, ErrBadRecord)
	}
	return nil
}

// checkU64 refuses numbers the signed 64-bit columns cannot hold.
func checkU64(op string, vals ...uint64) error {
	for _, v := range vals {
		if v > math.MaxInt64 {
			return fmt.Errorf("%s: value %d above 2^63-1: %w", op, v, ErrBadRecord)
		}
	}
	return nil
}

func encodeStrings(s []string) string {
	if s == nil {
		return ""
	}
	b, _ := json.Marshal(s) // a []string always marshals
	return string(b)
}

func decodeStrings(op, s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var out []string
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("%s: stored string list: %w", op, err)
	}
	return out, nil
}

// prefixEnd returns the smallest byte string greater than every string
// starting with p, or nil when there is none (p is all 0xff or empty).
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

func cols(names ...string) []clause.Column {
	out := make([]clause.Column, len(names))
	for i, n := range names {
		out[i] = clause.Column{Name: n}
	}
	return out
}

// doNothing is ON CONFLICT (cols) DO NOTHING, for at-most-once inserts.
func doNothing(names ...string) clause.OnConflict {
	return clause.OnConflict{Columns: cols(names...), DoNothing: true}
}

// replace is ON CONFLICT (cols) DO UPDATE of every column.
func replace(names ...string) clause.OnConflict {
	return clause.OnConflict{Columns: cols(names...), UpdateAll: true}
}

// forUpdate locks the rows read, where the dialect has row locks.
var forUpdate = clause.Locking{Strength: clause.LockingStrengthUpdate}
