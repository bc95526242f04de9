package keypackage_test

import (
	"context"
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/regroup-mls/regroup/adapters/clock"
	"github.com/regroup-mls/regroup/core/keypackage"
	"github.com/regroup-mls/regroup/ports"
)

// BenchmarkValidate measures sender validation of one key package next to
// its two Ed25519 signature verifications (KeyPackage and leaf), and next
// to those plus JOIN-090's HPKE sender setup, measured in the same run:
// ratio_to_sigs and ratio_to_sigs_and_setup.
func BenchmarkValidate(b *testing.B) {
	for _, alg := range []ports.WrapperAlgorithmID{ports.WrapperCurve25519, ports.WrapperXWingMLKEM768Draft6} {
		b.Run(alg.String(), func(b *testing.B) {
			v := validator(b)
			pub, priv, _ := ed25519.GenerateKey(nil)
			exts := goodExtensions(b, alg)
			kp := craft{suite: 3, inbox: testInbox, signer: priv, notBefore: t0.Add(-time.Hour), notAfter: t0.Add(time.Hour), exts: exts}.build(b)
			msg, sig := kp[:len(kp)-64], ed25519.Sign(priv, kp[:len(kp)-64])
			w, _ := registry(b).Wrapper(alg)
			vk, _ := v.Engine.ValidateKeyPackage(context.Background(), kp, ports.ValidateOptions{})
			var wkey []byte
			out := keypackage.Validated{}
			keypackage.CheckAddressing(context.Background(), v.Wrappers, vk, &out)
			wkey = out.WrapperPublicKey
			ref := func(setup bool) time.Duration {
				const n = 200
				start := time.Now()
				for i := 0; i < n; i++ {
					ed25519.Verify(pub, msg, sig)
					ed25519.Verify(pub, msg, sig)
					if setup {
						w.CheckPublicKey(context.Background(), wkey)
					}
				}
				return time.Since(start) / n
			}
			sigs, sigsSetup := ref(false), ref(true)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := v.Validate(context.Background(), kp, testInbox, pub, t0); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			per := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(time.Second)/float64(per), "validations/s")
			b.ReportMetric(float64(per)/float64(sigs), "ratio_to_sigs")
			b.ReportMetric(float64(per)/float64(sigsSetup), "ratio_to_sigs_and_setup")
		})
	}
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
