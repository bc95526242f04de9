package group_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
)

// BenchmarkJoin measures joining groups of 10, 100 and 1,000 members
// from the bytes of a Welcome carrying the ratchet tree (decode, open,
// verify the GroupInfo, validate the tree, install), next to the reference
// measured in the same loop: verifying the signature of every leaf of that
// tree one by one (message.LeafNode.Verify). The two alternate in every
// iteration, so load on the machine weighs on both alike. Metrics:
// ms/join, ms/verify-leaves-singly, ratio_to_single_verify (join ÷
// reference), and the bytes and allocations of the join alone
// (join-B/op, join-allocs/op).
func BenchmarkJoin(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 10000} {
		b.Run(fmt.Sprintf("members-%d", n), func(b *testing.B) {
			s, ga, _ := scaleGroup(b, n)
			joiner := newClient(b, s, "joiner")
			add, err := ga.Commit(&group.CommitOptions{TreeInWelcome: true,
				Proposals: []*message.Proposal{{Type: message.ProposalAdd, Add: &message.Add{KeyPackage: *joiner.kp}}}})
			if err != nil {
				b.Fatal(err)
			}
			msg, err := codec.Marshal(welcomeMessage(add.Welcome))
			if err != nil {
				b.Fatal(err)
			}
			tree, gid := add.Tree(), ga.GroupContext().GroupID
			join := func() {
				m, err := framing.Decode(msg)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := group.Join(s, m.Welcome, &group.JoinOptions{KeyPackage: joiner.kp, InitPriv: joiner.initPr,
					EncryptionPriv: joiner.encPriv, SignaturePriv: joiner.sigPriv}); err != nil {
					b.Fatal(err)
				}
			}
			verifySingly := func() {
				for _, l := range tree.Members() {
					if err := tree.Leaf(l).Verify(s, gid, uint32(l)); err != nil {
						b.Fatal(err)
					}
				}
			}
			var joined, ref time.Duration
			var before, after runtime.MemStats
			var bytes, allocs uint64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				runtime.ReadMemStats(&before)
				t0 := time.Now()
				join()
				t1 := time.Now()
				runtime.ReadMemStats(&after)
				bytes, allocs = bytes+after.TotalAlloc-before.TotalAlloc, allocs+after.Mallocs-before.Mallocs
				t2 := time.Now()
				verifySingly()
				joined, ref = joined+t1.Sub(t0), ref+time.Since(t2)
			}
			b.StopTimer()
			b.ReportMetric(joined.Seconds()*1e3/float64(b.N), "ms/join")
			b.ReportMetric(ref.Seconds()*1e3/float64(b.N), "ms/verify-leaves-singly")
			b.ReportMetric(joined.Seconds()/ref.Seconds(), "ratio_to_single_verify")
			b.ReportMetric(float64(bytes)/float64(b.N), "join-B/op")
			b.ReportMetric(float64(allocs)/float64(b.N), "join-allocs/op")
		})
	}
}
