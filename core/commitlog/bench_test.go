package commitlog

import (
	"crypto/ed25519"
	"runtime"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// benchLog returns a page of n envelopes forming one publisher's chain and
// the admission state of a reader that has processed every commit.
func benchLog(b *testing.B, n int) (Keys, []*backendpb.OriginatorEnvelope, func() *admission) {
	k := testKeys(b, 5)
	pub, priv, _ := ed25519.GenerateKey(nil)
	var envs []*backendpb.OriginatorEnvelope
	auth := []byte("genesis-authenticator-0000000000")
	for i := 1; i <= n; i++ {
		next := sha512Sum([]byte(auth))[:32]
		e := &contentspb.PlaintextCommitLogEntry{GroupId: k.GroupID, CommitSequenceId: uint64(i), CommitResult: 1,
			LastEpochAuthenticator: auth, AppliedEpochNumber: uint64(i), AppliedEpochAuthenticator: next}
		s, err := Seal(k, e, priv)
		if err != nil {
			b.Fatal(err)
		}
		envs = append(envs, &backendpb.OriginatorEnvelope{SequenceId: uint64(n + i), Envelope: Envelope(k, s)})
		auth = next
	}
	var d metadata.Dictionary
	d = d.Set(metadata.ComponentConversationType, metadata.EncodeConversationType(ports.ConversationGroup))
	d = d.Set(metadata.ComponentSuperAdminList, metadata.EncodeInboxList([]string{"admin"}))
	ext, _ := d.Extension()
	view := ports.GroupView{GroupID: k.GroupID, Epoch: uint64(n), Extensions: []ports.Extension{ext}, Active: true,
		Members: []ports.Member{{LeafIndex: 0, SignatureKey: pub, InboxID: "admin"}, {LeafIndex: 1, SignatureKey: make([]byte, 32), InboxID: "other"}}}
	l := &Log{opts: Options{Roles: MetadataRoles{}}}
	rs, err := l.roles(ports.ConversationGroup, view)
	if err != nil {
		b.Fatal(err)
	}
	fresh := func() *admission {
		return &admission{groupID: k.GroupID, active: true, cursor: uint64(n), roles: rs, boundaries: map[string]uint64{}, bound: maxStorable}
	}
	return k, envs, fresh
}

// BenchmarkReadVerifyAdmit measures entries read (from a page the
// transport returned), verified and admitted per second, next to the
// bound set by two Ed25519 verifications per entry measured in the same
// run: metric ratio_to_2verify = entries/s ÷ (1 / cost of two
// crypto/ed25519 verifications). Storage is not included.
func BenchmarkReadVerifyAdmit(b *testing.B) {
	for _, c := range []struct {
		name string
		n    int // entries per page (one query, one verifier call)
		v    func() Verifier
	}{
		{"single/page=1000", 1000, func() Verifier { return SingleVerifier{} }},
		{"batch/page=256", 256, func() Verifier { return NewBatchVerifier() }},
		{"batch/page=1000", 1000, func() Verifier { return NewBatchVerifier() }},
	} {
		n := c.n
		b.Run(c.name, func(b *testing.B) {
			k, envs, fresh := benchLog(b, n)
			v := c.v()
			// Reference: the two signature checks of each entry, alone.
			refChecks := make([]SignatureCheck, 0, 2*n)
			for _, env := range envs {
				refChecks = append(refChecks, prepare(k, k.GroupID, env).checks...)
			}
			// The pipeline and the reference alternate in every iteration and
			// are timed in this thread's CPU time, so that load from other
			// processes weighs on neither.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var pipe, ref time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := threadCPU()
				prepared, verdicts := verifyPage(v, k, k.GroupID, envs)
				if r := fresh().admit(prepared, verdicts); len(r.accepted) != n {
					b.Fatalf("accepted %d of %d: %v", len(r.accepted), n, r.counts)
				}
				t1 := threadCPU()
				for _, ok := range (SingleVerifier{}).VerifyAll(refChecks) {
					if !ok {
						b.Fatal("reference verification failed")
					}
				}
				pipe, ref = pipe+(t1-t0), ref+(threadCPU()-t1)
			}
			b.StopTimer()
			perEntry := pipe.Seconds() / float64(b.N*n)
			refPerEntry := ref.Seconds() / float64(b.N*n)
			b.ReportMetric(1/perEntry, "entries/s")
			b.ReportMetric(1/refPerEntry, "2verify-bound/s")
			b.ReportMetric(refPerEntry/perEntry, "ratio_to_2verify")
		})
	}
}
