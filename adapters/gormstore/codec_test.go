package gormstore

import (
	"bytes"
	"testing"
	"time"
)

// FuzzPrefixEnd checks the range Blobs.Keys uses in place of LIKE: a key
// starts with p exactly when p <= key and (no end or key < end).
func FuzzPrefixEnd(f *testing.F) {
	for _, seed := range [][2][]byte{
		{[]byte("a/"), []byte("a/1")}, {[]byte("a\xff"), []byte("b")}, {[]byte("\xff\xff"), []byte("\xff\xff\x00")},
		{[]byte("a/"), []byte("a0")}, {[]byte("ab"), []byte("a")},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, p, key []byte) {
		if len(p) == 0 {
			return
		}
		end := prefixEnd(p)
		inRange := bytes.Compare(key, p) >= 0 && (end == nil || bytes.Compare(key, end) < 0)
		if inRange != bytes.HasPrefix(key, p) {
			t.Fatalf("prefix %x, key %x: range [%x, %x) says %v", p, key, p, end, inRange)
		}
	})
}

// FuzzDecodeStrings feeds arbitrary stored text to the decoder of
// AddedSuperAdmins: it returns a value or an error, never panics, and what
// it returns encodes back to the same list.
func FuzzDecodeStrings(f *testing.F) {
	for _, s := range []string{"", "[]", `["a","b"]`, "null", "{", `[1]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := decodeStrings("test", s)
		if err != nil {
			return
		}
		again, err := decodeStrings("test", encodeStrings(out))
		if err != nil || len(again) != len(out) {
			t.Fatalf("%q decoded to %q, which round-trips to %q (%v)", s, out, again, err)
		}
	})
}

func TestTimesRoundTrip(t *testing.T) {
	for _, tm := range []time.Time{{}, time.Unix(0, 1), time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))} {
		if got := fromNs(toNs(tm)); !got.Equal(tm) {
			t.Errorf("%v read back as %v", tm, got)
		}
	}
}
