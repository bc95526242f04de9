package deliverydb

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/regroup-mls/regroup/ports"
)

// COMP-476: leave records block each installation named, keep the higher
// Through when recorded again, list their inboxes once, and go with
// ForgetLeave; a record of another group blocks nothing.
func TestCOMP476_LeaveRecords_Store(t *testing.T) {
	ctx := context.Background()
	for name, open := range dbs() {
		t.Run(name, func(t *testing.T) { leaveRecords(ctx, t, open(t)) })
	}
}

func leaveRecords(ctx context.Context, t *testing.T, s *Store) {
	group, other := topic()[1:], topic()[1:]
	k1, k2, k3 := []byte("key-1"), []byte("key-2"), []byte("key-3")
	if _, ok, err := s.LeftThrough(ctx, group, k1); ok || err != nil {
		t.Fatalf("no record yet: %v, %v", ok, err)
	}
	if err := s.RecordLeave(ctx, ports.LeaveRecord{GroupID: group, InboxID: "bob", InstallationKeys: [][]byte{k1, k2}, Through: 7}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordLeave(ctx, ports.LeaveRecord{GroupID: group, InboxID: "bob", InstallationKeys: [][]byte{k1}, Through: 9}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordLeave(ctx, ports.LeaveRecord{GroupID: group, InboxID: "bob", InstallationKeys: [][]byte{k2}, Through: 3}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordLeave(ctx, ports.LeaveRecord{GroupID: group, InboxID: "carol", InstallationKeys: [][]byte{k3}, Through: 4}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key     []byte
		through uint64
	}{{k1, 9}, {k2, 7}, {k3, 4}} {
		if n, ok, err := s.LeftThrough(ctx, group, c.key); !ok || err != nil || n != c.through {
			t.Fatalf("%s: through %d, %v, %v; want %d", c.key, n, ok, err, c.through)
		}
	}
	if _, ok, _ := s.LeftThrough(ctx, other, k1); ok {
		t.Fatal("a record blocks its installation in another group")
	}
	if got, err := s.LeftInboxes(ctx, group); err != nil || !slices.Equal(got, []string{"bob", "carol"}) {
		t.Fatalf("left inboxes = %q, %v", got, err)
	}
	if err := s.ForgetLeave(ctx, group, "bob"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.LeftThrough(ctx, group, k2); ok {
		t.Fatal("a forgotten record still blocks")
	}
	if got, _ := s.LeftInboxes(ctx, group); !slices.Equal(got, []string{"carol"}) {
		t.Fatalf("left inboxes after forgetting bob = %q", got)
	}
	if err := s.RecordLeave(ctx, ports.LeaveRecord{GroupID: group, InboxID: "", InstallationKeys: [][]byte{k1}}); err == nil {
		t.Fatal("a record without an inbox was stored")
	}
}

// Stored-format rule: the recorded version-4 database gets the leave
// records table (migration 8) and keeps them.
func TestCOMP476_RecordedV4DatabaseKeepsLeaves(t *testing.T) {
	ctx := context.Background()
	raw, err := os.ReadFile("testdata/deliverydb-v4.db")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "v4.db")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := OpenSQLite(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	leaveRecords(ctx, t, s)
}

// BenchmarkCOMP476_LeftThrough measures the leave-record lookup every
// read of a group-message topic makes with acceptance on, next to the
// reference it adds to: reading a page of ten envelopes of that topic.
func BenchmarkCOMP476_LeftThrough(b *testing.B) {
	ctx := context.Background()
	s, err := OpenSQLite(ctx, filepath.Join(b.TempDir(), "d.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	gt := topic()
	envs := make([]ports.NewStoredEnvelope, 10)
	for i := range envs {
		envs[i] = env(gt, byte(i))
	}
	if _, err := s.Append(ctx, envs); err != nil {
		b.Fatal(err)
	}
	if err := s.RecordLeave(ctx, ports.LeaveRecord{GroupID: gt[1:], InboxID: "bob", InstallationKeys: [][]byte{[]byte("k")}, Through: 5}); err != nil {
		b.Fatal(err)
	}
	b.Run("lookup", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := s.LeftThrough(ctx, gt[1:], []byte("other")); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reference-page-of-10", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Range(ctx, gt, 0, 10, 1<<20); err != nil {
				b.Fatal(err)
			}
		}
	})
}
