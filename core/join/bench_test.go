package join_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/memtransport"
	"github.com/regroup-mls/regroup/adapters/mls/ciphersuite"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/framing"
	"github.com/regroup-mls/regroup/adapters/mls/group"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/core/delivery"
	"github.com/regroup-mls/regroup/core/identity"
	"github.com/regroup-mls/regroup/core/keypackage"
	"github.com/regroup-mls/regroup/core/metadata"
	"github.com/regroup-mls/regroup/ports"
	"github.com/regroup-mls/regroup/proto/backendpb"
	"github.com/regroup-mls/regroup/proto/contentspb"
)

// members publishes the identities of n installations, two per inbox, and
// returns their key packages and GROUP_MEMBERSHIP entries.
func (a *inst) members(n int) ([][]byte, memberships) {
	w := a.w
	tr := memtransport.New(w.svc, nil)
	var kps [][]byte
	mem := memberships{}
	var recovery ed25519.PrivateKey
	now := w.clock.Now()
	for i := 0; i < n; i++ {
		if i%2 == 0 {
			_, recovery, _ = ed25519.GenerateKey(nil)
		}
		_, inst, _ := ed25519.GenerateKey(nil)
		inbox := identity.InboxID(recovery.Public().(ed25519.PublicKey))
		u, err := identity.NewAdd(recovery, inst, now.UnixNano())
		if err != nil {
			w.t.Fatal(err)
		}
		topic, _ := identity.Topic(inbox)
		if _, err := tr.Publish(w.ctx, []*backendpb.ClientEnvelope{{TargetTopic: topic,
			Payload: &backendpb.ClientEnvelope_IdentityUpdate{IdentityUpdate: u}}}); err != nil {
			w.t.Fatal(err)
		}
		kp, err := a.eng.CreateKeyPackage(w.ctx, ports.KeyPackageOptions{Credential: mustMarshal(&contentspb.MlsCredential{InboxId: inbox}),
			SignaturePrivateKey: inst.Seed(), NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
			CapabilityExtensions: keypackage.CapabilityExtensions(), CapabilityProposals: keypackage.CapabilityProposals()})
		if err != nil {
			w.t.Fatal(err)
		}
		kps = append(kps, kp.KeyPackage)
		mem[inbox] = nil
	}
	for inbox := range mem {
		mem[inbox] = &contentspb.GroupMembershipEntry_V1{SequenceId: a.association(inbox).SequenceID}
	}
	return kps, mem
}

func copyStore(b *testing.B, from, to string) {
	matches, _ := filepath.Glob(from + "*")
	for _, m := range matches {
		data, err := os.ReadFile(m)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(to+strings.TrimPrefix(m, from), data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWelcome measures processing one Welcome through the ports on
// SQLite (read the topic, unwrap, stage, resolve every member inbox's
// identity from the delivery service, validate, install with the commit
// log's membership) at 10, 100, 1,000 and 10,000 members. In the same run it
// measures the engine's own join of that Welcome in memory (the reference,
// group.Join), the unwrap alone, and the identity resolution of every
// member inbox alone from an empty cache, both one AssociationState call
// per inbox (identity-1by1) and one AssociationStates call
// (identity-batch, what the receiver uses), and reports each per
// operation and the overhead ratio against the engine.
func BenchmarkWelcome(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 10000} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			// One publisher stores every member's identity update: about
			// 1.1 MB at 10,000 members, past the default hourly quota of
			// identity updates (COMP-325). The Welcome carries the tree
			// (JOIN-040): 3.8 MB at 10,000 members, past the default
			// envelope limit of 1 MiB, and so is the commit that adds
			// them. Every other default stays.
			quotas := delivery.DefaultQuotas()
			quotas[ports.TopicIdentityUpdates] = delivery.Quota{Bytes: 1 << 30, Window: time.Hour}
			w := newWorldWith(b, "sqlite", delivery.Options{Quotas: quotas, MaxEnvelopeBytes: 64 << 20})
			// The joiner waits for its identity lookup to answer: the
			// benchmark times the lookup, not the hold-and-retry path a
			// lookup slower than DefaultIdentityTimeout takes (COMP-255).
			a, j := w.newInst("adder", instOptions{}), w.newInst("joiner", instOptions{IdentityTimeout: 30 * time.Minute})
			kps, mem := a.members(n - 2)
			g := a.newGroup(groupSpec{})
			ad := g.add(addSpec{extra: kps, edit: func(m memberships, d metadata.Dictionary) metadata.Dictionary {
				for k, v := range mem {
					m[k] = v
				}
				return d.Set(metadata.ComponentGroupMembership, metadata.EncodeMembership(m))
			}}, j)
			g.send(ad)
			recs := j.records()
			rec := recs[len(recs)-1]
			j.store.Close()
			pristine := filepath.Join(b.TempDir(), "pristine.db")
			copyStore(b, j.locator, pristine)

			s, _ := ciphersuite.Lookup(ciphersuite.MLS128X25519ChaCha20Poly1305SHA256Ed25519)
			m, _ := framing.Decode(ad.welcome)
			var kp message.KeyPackage
			if err := codec.Unmarshal(rec.KeyPackage, &kp); err != nil {
				b.Fatal(err)
			}
			env := g.a.inline(ad.recipients[0], ports.WrapperXWingMLKEM768Draft6, ports.WrapperXWingMLKEM768Draft6, ad.welcome, meta(ad.anchor)).GetWelcomeMessage().GetV1()
			wr, _ := j.reg.Wrapper(ports.WrapperXWingMLKEM768Draft6)
			var reqs []ports.IdentityRequest
			for inbox, e := range mem {
				reqs = append(reqs, ports.IdentityRequest{InboxID: inbox, SequenceID: e.SequenceId})
			}
			var engine, unwrap, identSeq, identBatch time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				copyStore(b, pristine, j.locator)
				j.reopen()
				b.StartTimer()
				j.process()
				b.StopTimer()
				if gr, ok := j.group(g.id); !ok || gr.Cursor != ad.anchor {
					b.Fatalf("not joined: %+v", gr)
				}
				start := time.Now()
				if _, err := group.Join(s, m.Welcome, &group.JoinOptions{KeyPackage: &kp, InitPriv: rec.InitPrivateKey,
					EncryptionPriv: rec.EncryptionPrivateKey, SignaturePriv: j.id.InstallationKey.Seed()}); err != nil {
					b.Fatal(err)
				}
				engine += time.Since(start)
				start = time.Now()
				if _, err := wr.Open(w.ctx, rec.WrapperPrivateKey, ports.WelcomeWrapperInfo(), env.Data, env.WelcomeMetadata); err != nil {
					b.Fatal(err)
				}
				unwrap += time.Since(start)
				j.store.Close()
				copyStore(b, pristine, j.locator)
				j.reopen()
				start = time.Now()
				for _, q := range reqs {
					if _, err := j.res.AssociationState(context.Background(), q.InboxID, q.SequenceID); err != nil {
						b.Fatal(err)
					}
				}
				identSeq += time.Since(start)
				j.store.Close()
				copyStore(b, pristine, j.locator)
				j.reopen()
				start = time.Now()
				res, err := j.res.AssociationStates(context.Background(), reqs)
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range res {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
				}
				identBatch += time.Since(start)
				j.store.Close()
				b.StartTimer()
			}
			per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
			total := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(per(engine), "engine-join-ns/op")
			b.ReportMetric(total/per(engine), "x-engine-join")
			b.ReportMetric(per(unwrap), "unwrap-ns/op")
			b.ReportMetric(per(identSeq), "identity-1by1-ns/op")
			b.ReportMetric(per(identBatch), "identity-batch-ns/op")
		})
	}
}
