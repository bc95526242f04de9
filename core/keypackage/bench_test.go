package keypackage_test

import (
	"context"
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/adapters/grpctransport"
	"github.com/regroup-mls/regroup/adapters/mls/codec"
	"github.com/regroup-mls/regroup/adapters/mls/message"
	"github.com/regroup-mls/regroup/core/keypackage"
	"github.com/regroup-mls/regroup/ports"
)

// BenchmarkValidate measures sender validation of one key package
// (Validator.Validate) next to the cryptography JOIN-007 and JOIN-090
// require of it, measured in the same iterations so that both see the same
// load on a shared machine: the two Ed25519 verifications RFC 9420 §10.1
// asks for (the KeyPackage signature and the leaf node's, over their
// exact signed contents) and the HPKE sender setup under the advertised
// wrapper key (JOIN-090). It reports validations/s, the reference's parts
// per operation, the allocations of one validation alone (B/op and
// allocs/op count the reference's too), and validate's time over the two
// verifications
// (ratio_to_sigs) and over verifications plus setup
// (ratio_to_sigs_and_setup).
func BenchmarkValidate(b *testing.B) {
	for _, alg := range []ports.WrapperAlgorithmID{ports.WrapperCurve25519, ports.WrapperXWingMLKEM768Draft6} {
		b.Run(alg.String(), func(b *testing.B) {
			ctx := context.Background()
			v := validator(b)
			pub, priv, _ := ed25519.GenerateKey(nil)
			kp := craft{suite: 3, inbox: testInbox, signer: priv, notBefore: t0.Add(-time.Hour), notAfter: t0.Add(time.Hour),
				exts: goodExtensions(b, alg)}.build(b)
			sigs := signedContents(b, kp)
			for _, s := range sigs {
				if !ed25519.Verify(pub, s.content, s.sig) {
					b.Fatal("reference: a signature of the package does not verify over its signed content")
				}
			}
			val, err := v.Validate(ctx, kp, testInbox, pub, t0)
			if err != nil {
				b.Fatal(err)
			}
			w, _ := registry(b).Wrapper(alg)
			allocs := testing.AllocsPerRun(20, func() { v.Validate(ctx, kp, testInbox, pub, t0) })
			var tVal, tSigs, tSetup time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				if _, err := v.Validate(ctx, kp, testInbox, pub, t0); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				for _, s := range sigs {
					ed25519.Verify(pub, s.content, s.sig)
				}
				setup := time.Now()
				if err := w.CheckPublicKey(ctx, val.WrapperPublicKey); err != nil {
					b.Fatal(err)
				}
				end := time.Now()
				tVal, tSigs, tSetup = tVal+mid.Sub(start), tSigs+setup.Sub(mid), tSetup+end.Sub(setup)
			}
			b.StopTimer()
			per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
			b.ReportMetric(float64(b.N)/tVal.Seconds(), "validations/s")
			b.ReportMetric(per(tVal), "validate-ns/op")
			b.ReportMetric(allocs, "validate-allocs/op")
			b.ReportMetric(per(tSigs), "2verify-ns/op")
			b.ReportMetric(per(tSetup), "hpke-setup-ns/op")
			b.ReportMetric(per(tVal)/per(tSigs), "ratio_to_sigs")
			b.ReportMetric(per(tVal)/(per(tSigs)+per(tSetup)), "ratio_to_sigs_and_setup")
		})
	}
}

type signed struct{ content, sig []byte }

// signedContents returns the two signatures of a TLS KeyPackage with the
// exact bytes each covers (RFC 9420 §5.1.2 SignContent): the KeyPackageTBS
// under "KeyPackageTBS" and the leaf node's LeafNodeTBS under
// "LeafNodeTBS" (a key_package leaf adds no group context).
func signedContents(t testing.TB, kp []byte) []signed {
	var k message.KeyPackage
	if err := codec.Unmarshal(kp, &k); err != nil {
		t.Fatal(err)
	}
	leaf, err := codec.Marshal(&k.LeafNode)
	if err != nil {
		t.Fatal(err)
	}
	split := func(b []byte) (tbs, sig []byte) {
		// A 64-byte vector's length is the two-byte varint 0x40 0x40.
		if len(b) < 66 || b[len(b)-66] != 0x40 || b[len(b)-65] != 0x40 {
			t.Fatal("reference: the encoding does not end in a 64-byte signature")
		}
		return b[:len(b)-66], b[len(b)-64:]
	}
	var out []signed
	for _, p := range []struct {
		label string
		enc   []byte
	}{{"KeyPackageTBS", kp}, {"LeafNodeTBS", leaf}} {
		tbs, sig := split(p.enc)
		content := appendVector(appendVector(nil, []byte("MLS 1.0 "+p.label)), tbs)
		out = append(out, signed{content: content, sig: sig})
	}
	return out
}

// appendVector appends an RFC 9420 variable-length vector (§2.1.2).
func appendVector(b, v []byte) []byte {
	switch n := len(v); {
	case n < 1<<6:
		b = append(b, byte(n))
	case n < 1<<14:
		b = append(b, 0x40|byte(n>>8), byte(n))
	default:
		b = append(b, 0x80|byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, v...)
}

// BenchmarkRotate measures one rotation (build, store, publish, confirm)
// on SQLite through an in-process delivery service next to one key-package
// build alone, measured in the same run: ratio_to_build.
func BenchmarkRotate(b *testing.B) {
	clk := clock.NewFake(t0)
	in := newInstallation(b, "sqlite", newService(b, clk), clk)
	ctx := context.Background()
	const n = 20
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := keypackage.Build(ctx, keypackage.BuildOptions{Engine: in.engine, Wrappers: in.reg,
			InboxID: in.id.InboxID, InstallationKey: in.id.InstallationKey, Now: t0}); err != nil {
			b.Fatal(err)
		}
	}
	build := time.Since(start) / n
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := in.mgr.Rotate(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	per := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(float64(per)/float64(build), "ratio_to_build")
	b.ReportMetric(float64(build.Microseconds()), "build_µs")
}

// BenchmarkFetchInboxes measures what a sender does before adding 100
// inboxes of two installations each: fetch every installation's newest
// key package from regroupd over gRPC on 127.0.0.1 (its rate limits
// off) and validate it. It
// runs FetchInboxes with the default concurrency and, in the same
// iterations, one installation at a time (Concurrency 1, what FetchInbox
// per inbox did), and reports both per add and their ratio.
func BenchmarkFetchInboxes(b *testing.B) {
	svc := newService(b, clock.NewFake(t0))
	// Without regroupd's rate limits: the figure is the sender's work.
	addr := serveGRPCWith(b, svc, &grpctransport.ServerOptions{RatePerSecond: -1, IdentityRatePerSecond: -1, GlobalRatePerSecond: -1})
	tr, err := grpctransport.Dial(addr, &grpctransport.ClientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tr.Close() })
	var states []ports.AssociationState
	for range 100 {
		w := newSenderWorldOn(b, svc, 2)
		for i := range 2 {
			w.publish(i, w.craft(i).build(b))
		}
		states = append(states, w.state())
	}
	ctx := context.Background()
	par, seq := validator(b), validator(b)
	seq.Concurrency = 1
	run := func(v *keypackage.Validator) time.Duration {
		start := time.Now()
		_, errs := v.FetchInboxes(ctx, tr, states, t0)
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	var tPar, tSeq time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tPar += run(par)
		tSeq += run(seq)
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
	b.ReportMetric(per(tPar), "concurrent-ns/add")
	b.ReportMetric(per(tSeq), "one-at-a-time-ns/add")
	b.ReportMetric(per(tSeq)/per(tPar), "speedup")
}
