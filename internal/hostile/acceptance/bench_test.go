package acceptance_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/client"
	"github.com/regroup-mls/regroup/internal/testenv"
	"github.com/regroup-mls/regroup/internal/world"
)

// BenchmarkTwoPhaseCommit measures, against a regroupd process over gRPC
// on SQLite and PostgreSQL, with real clients, at 10 and 100 members:
//
//   - confirm-ms: a member's (not a super admin's) key update from its
//     publish to its confirmation, two phases on with no grace period, one
//     other member witnessing with its workers running;
//   - owner-ms, the reference of the same run: the super admin's key
//     update, which takes effect at once (one commit round);
//   - off-ms: the same member's key update against a second regroupd with
//     commit acceptance on and two phases off.
//
// Commits per second are 1000 / the figure. REGROUP_BENCH_TWOPHASE_MEMBERS
// overrides the group sizes (comma-free: one size).
func BenchmarkTwoPhaseCommit(b *testing.B) {
	sizes := []int{10, 100}
	if v := os.Getenv("REGROUP_BENCH_TWOPHASE_MEMBERS"); v != "" {
		var n int
		if _, err := fmt.Sscan(v, &n); err == nil && n >= 3 {
			sizes = []int{n}
		}
	}
	for _, mode := range world.Networked {
		b.Run(mode, func(b *testing.B) {
			if mode == "postgres" && os.Getenv("REGROUP_POSTGRES_DSN") == "" {
				b.Skip("REGROUP_POSTGRES_DSN is unset")
			}
			for _, n := range sizes {
				b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
					on := benchGroup(b, mode, n, "-accept-commits", "-two-phase", "-grace-period", "0s", "-pending-expiry", "1h", "-max-connections-per-address", "-1")
					off := benchGroup(b, mode, n, "-accept-commits", "-max-connections-per-address", "-1")
					var confirm, owner, offd time.Duration
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						confirm += on.timeCommit(b, on.member)
						owner += on.timeCommit(b, on.owner)
						offd += off.timeCommit(b, off.member)
					}
					b.StopTimer()
					ms := func(d time.Duration) float64 { return float64(d) / float64(b.N) / 1e6 }
					b.ReportMetric(ms(confirm), "confirm-ms")
					b.ReportMetric(ms(owner), "owner-ms")
					b.ReportMetric(ms(offd), "off-ms")
					b.ReportMetric(ms(confirm)/ms(owner), "confirm/owner")
					b.ReportMetric(ms(offd)/ms(confirm), "rate-on/off")
				})
			}
		})
	}
}

// benchSetup is one group of n members on its own regroupd: the super
// admin, the committing member and a witness run their workers; the
// other members only hold leaves.
type benchSetup struct {
	w             *world.World
	id            []byte
	owner, member *world.Member
}

func benchGroup(b *testing.B, mode string, n int, flags ...string) *benchSetup {
	b.Helper()
	r := testenv.StartRegroupdWith(b, mode, flags...)
	w := world.NewOn(b, mode, r, 30*time.Minute)
	owner, member, witness := w.Member("owner", world.Config{}), w.Member("member", world.Config{}), w.Member("witness", world.Config{})
	members := []*world.Member{member, witness}
	for i := 3; i < n; i++ {
		members = append(members, w.Member(fmt.Sprintf("m%d", i), world.Config{}))
	}
	g := &gate{World: w, t: nil}
	id := benchCreate(b, g, owner, members)
	for _, m := range []*world.Member{owner, member, witness} {
		if err := m.C.Start(w.Ctx); err != nil {
			b.Fatal(err)
		}
	}
	return &benchSetup{w: w, id: id, owner: owner, member: member}
}

// benchCreate is gate.group for a benchmark: the creator makes the group
// with the members, publishes its GroupInfo, and the three started
// members sync once.
func benchCreate(b *testing.B, g *gate, creator *world.Member, members []*world.Member) []byte {
	b.Helper()
	var inboxes []string
	for _, m := range members {
		inboxes = append(inboxes, m.C.InboxID())
	}
	cv, err := creator.C.CreateGroup(g.Ctx, groupOptions(inboxes))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := cv.PublishGroupInfo(g.Ctx); err != nil {
		b.Fatal(err)
	}
	world.SyncAll(creator, members[0], members[1])
	return cv.ID()
}

// timeCommit times m's key update until it took effect for m.
func (s *benchSetup) timeCommit(b *testing.B, m *world.Member) time.Duration {
	b.Helper()
	start := time.Now()
	if err := m.Conv(s.id).UpdateKeys(s.w.Ctx); err != nil {
		b.Fatalf("%s's key update: %v", m.Name, err)
	}
	return time.Since(start)
}

func groupOptions(inboxes []string) client.GroupOptions {
	return client.GroupOptions{Name: "bench", Members: inboxes}
}
